// The segment log's prepend(): records put in front of what it holds, in a file of their own.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "consumers/segment_log.hpp"
#include "consumers/segment_log_format.hpp"

namespace gatewayd::consumers {

namespace fmt = segment_log_format;

std::error_code segment_log::prepend(std::span<const std::span<const std::byte>> records) {
  if (!unconsumed_.empty()) return std::make_error_code(std::errc::invalid_argument);
  std::size_t total = fmt::resume_record_bytes;
  std::uint64_t payload = 0;
  for (const auto& r : records) {
    if (r.size() > max_record_bytes) return std::make_error_code(std::errc::message_size);
    total += header_bytes + r.size();
    payload += r.size();
  }
  if (records.empty()) return {};
  if (segments_.front().number == 0) return std::make_error_code(std::errc::value_too_large);
  // The number below the head's may be a file consumed since the last sync, removed with the
  // folder not yet synced, and the head persisted may still point into it: a crash after the
  // new file took its name would read the new records from the old head's offset. Syncing
  // first makes both the removal and the head durable (prepend is rare: one sync more).
  if (removed_unsynced_) dir_dirty_ = true;
  if (auto ec = sync(head_durability::now)) return ec;
  const std::uint64_t number = segments_.front().number - 1;
  const std::int64_t ms = head_ms_ && held_records_ > 0
                              ? *head_ms_
                              : std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();
  std::vector<std::byte> bytes(total);  // rare: a buffer of its own, not the write buffer
  fmt::encode_resume(bytes.data(), head_.segment, head_.offset);
  std::size_t at = fmt::resume_record_bytes;
  for (const auto& r : records) {
    fmt::encode(bytes.data() + at, r, ms);
    at += header_bytes + r.size();
  }
  const std::uint64_t resume_at = head_.offset;
  if (auto ec = write_prepended(number, bytes)) return ec;
  segments_.front().begin = resume_at;
  segments_.push_front({number, bytes.size(), fmt::resume_record_bytes});
  read_ = head_;
  head_ms_ = ms;
  held_records_ += records.size();
  held_bytes_ += payload;
  unread_records_ += records.size();
  return {};
}

// The new file written whole and made durable with its name, then the head moved to its first
// record and persisted. Any error: the file unlinked, the head where it was.
std::error_code segment_log::write_prepended(std::uint64_t number,
                                             std::span<const std::byte> bytes) {
  if (read_fd_segment_ == number) {  // a file of that number read before it was consumed
    ::close(read_fd_);
    read_fd_ = -1;
    read_fd_segment_ = fmt::no_segment;
  }
  if (read_buffer_segment_ == number) read_buffer_segment_ = fmt::no_segment;
  int fd = -1;
  if (auto ec = open_segment(number, true, fd)) return ec;
  std::error_code ec;
  for (std::size_t done = 0; !ec && done < bytes.size();) {
    const ssize_t n =
        ::pwrite(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ec = n < 0 ? fmt::last_error() : std::make_error_code(std::errc::io_error);
    if (n > 0) done += static_cast<std::size_t>(n);
  }
  if (!ec && ::fdatasync(fd) != 0) ec = fmt::last_error();
  ::close(fd);
  if (!ec && ::fsync(dir_fd_) != 0) ec = fmt::last_error();
  const position old_head = head_;
  if (!ec) {
    head_ = {number, fmt::resume_record_bytes};
    ec = write_head(head_durability::now);
    if (ec) head_ = old_head;
  }
  // Before the head, a file left by a failed unlink is removed by the next open().
  if (ec) (void)::unlink(segment_path(number).c_str());
  return ec;
}

}  // namespace gatewayd::consumers
