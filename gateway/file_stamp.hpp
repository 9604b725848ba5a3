// What a reader saw of a file (identity, size, times, a hash of its bytes), to tell later
// whether it was rewritten, replaced or touched since.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <vector>

namespace gatewayd::gateway {

struct file_stamp {
  bool exists = false;
  dev_t device = 0;
  ino_t inode = 0;
  std::uint64_t size = 0;
  std::int64_t modified_ns = 0;
  std::int64_t changed_ns = 0;  // ctime: also moves on rename and chmod, never set by users
  // Two saves within one tick of the file system's clock, of the same size, differ only here.
  std::uint64_t content_hash = 0;

  friend bool operator==(const file_stamp&, const file_stamp&) = default;
};

using file_stamps = std::map<std::filesystem::path, file_stamp>;

// Never blocks (a FIFO or device is stamped without being read) and never throws; a file
// that cannot be opened is stamped as absent.
file_stamp stamp_file(const std::filesystem::path& file) noexcept;
file_stamps stamp_files(const std::vector<std::filesystem::path>& files);

}  // namespace gatewayd::gateway
