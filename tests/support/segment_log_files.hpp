// The segment log's suites' helpers (segment_log_test, segment_log_recovery_test): a temp
// folder per case, numbered frames, appends and reads that check every frame's bytes.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "consumers/segment_log.hpp"

namespace gatewayd::test::segment_log_files {

using consumers::segment_log;
using consumers::segment_log_opened;
using consumers::segment_log_options;
namespace fs = std::filesystem;

inline constexpr std::size_t header = segment_log::header_bytes;

// A fresh folder under /tmp per case, removed after it.
struct temp_dir {
  fs::path path;
  temp_dir() {
    std::string tmpl = "/tmp/segment_log_test.XXXXXX";
    BOOST_REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path spool() const { return path / "spool"; }
};

// Frame `seq` of `size` bytes: its number, then bytes derived from it.
inline std::vector<std::byte> frame(std::uint64_t seq, std::size_t size) {
  std::vector<std::byte> f(size);
  std::memcpy(f.data(), &seq, std::min(size, sizeof seq));
  for (std::size_t i = sizeof seq; i < size; ++i)
    f[i] = static_cast<std::byte>((seq * 31 + i) & 0xff);
  return f;
}

inline std::unique_ptr<segment_log> open_log(const fs::path& dir, segment_log_options options,
                                             segment_log_opened& opened) {
  std::error_code ec;
  auto log = segment_log::open(dir, options, opened, ec);
  BOOST_REQUIRE_MESSAGE(log && !ec, "open: " << ec.message());
  return log;
}

inline std::unique_ptr<segment_log> open_log(const fs::path& dir,
                                             segment_log_options options = {}) {
  segment_log_opened opened;
  return open_log(dir, options, opened);
}

// Appends frames [from, from + n) of `size` bytes in one call.
inline std::error_code append(segment_log& log, std::uint64_t from, std::uint64_t n,
                              std::size_t size) {
  std::vector<std::vector<std::byte>> frames;
  std::vector<std::span<const std::byte>> spans;
  for (std::uint64_t i = 0; i < n; ++i)
    frames.push_back(frame(from + i, size));
  for (const auto& f : frames)
    spans.emplace_back(f);
  return log.append(spans);
}

// Prepends frames [from, from + n) of `size` bytes in one call.
inline std::error_code prepend(segment_log& log, std::uint64_t from, std::uint64_t n,
                               std::size_t size) {
  std::vector<std::vector<std::byte>> frames;
  std::vector<std::span<const std::byte>> spans;
  for (std::uint64_t i = 0; i < n; ++i)
    frames.push_back(frame(from + i, size));
  for (const auto& f : frames)
    spans.emplace_back(f);
  return log.prepend(spans);
}

// Reads up to max_bytes and returns the frames' numbers, each frame's bytes checked.
inline std::vector<std::uint64_t> read_seqs(segment_log& log, std::size_t max_bytes = SIZE_MAX) {
  std::vector<std::byte> out;
  std::vector<std::uint32_t> sizes;
  const std::error_code ec = log.read(max_bytes, out, sizes);
  BOOST_REQUIRE_MESSAGE(!ec, "read: " << ec.message());
  std::vector<std::uint64_t> seqs;
  std::size_t at = 0;
  for (const std::uint32_t size : sizes) {
    std::uint64_t seq = 0;
    std::memcpy(&seq, out.data() + at, sizeof seq);
    BOOST_TEST(
        (frame(seq, size) == std::vector<std::byte>(out.begin() + at, out.begin() + at + size)));
    seqs.push_back(seq);
    at += size;
  }
  BOOST_TEST(at == out.size());
  return seqs;
}

inline std::vector<std::uint64_t> range(std::uint64_t from, std::uint64_t to) {
  std::vector<std::uint64_t> v;
  for (std::uint64_t i = from; i < to; ++i)
    v.push_back(i);
  return v;
}

inline std::vector<std::uint64_t> operator+(std::vector<std::uint64_t> a,
                                            const std::vector<std::uint64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

inline std::vector<fs::path> segment_files(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".seg") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Overwrites the byte at `offset` of `file` in place (a bit gone bad on disk).
inline void overwrite_byte(const fs::path& file, std::uint64_t offset, char byte) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(byte);
  BOOST_REQUIRE_MESSAGE(f.good(), "could not overwrite " << file << " at " << offset);
}

inline unsigned mode_of(const fs::path& p) {
  struct stat st {};
  BOOST_REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

}  // namespace gatewayd::test::segment_log_files
