#include "gateway/file_stamp.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "config/toml_checker.hpp"

namespace gatewayd::gateway {
namespace {

std::int64_t ns_of(const timespec& t) noexcept {
  return std::int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

}  // namespace

file_stamp stamp_file(const std::filesystem::path& file) noexcept {
  file_stamp s;
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return s;
  s.exists = true;
  s.device = st.st_dev;
  s.inode = st.st_ino;
  s.size = static_cast<std::uint64_t>(st.st_size);
  s.modified_ns = ns_of(st.st_mtim);
  s.changed_ns = ns_of(st.st_ctim);
  // Only a regular file is opened: opening a FIFO or a device can block or act on it.
  if (!S_ISREG(st.st_mode)) return s;
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return s;
  // FNV-1a over what a loader would read (no more than it accepts).
  std::uint64_t h = 14695981039346656037ull;
  char buf[16384];
  std::uint64_t left = config::max_config_file_bytes + 1;
  for (ssize_t n; left > 0 && (n = ::read(fd, buf, sizeof buf)) > 0;) {
    for (ssize_t i = 0; i < n; ++i)
      h = (h ^ static_cast<unsigned char>(buf[i])) * 1099511628211ull;
    left -= std::min<std::uint64_t>(left, static_cast<std::uint64_t>(n));
  }
  ::close(fd);
  s.content_hash = h;
  return s;
}

file_stamps stamp_files(const std::vector<std::filesystem::path>& files) {
  file_stamps out;
  for (const auto& f : files)
    out.emplace(f, stamp_file(f));
  return out;
}

}  // namespace gatewayd::gateway
