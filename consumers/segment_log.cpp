// The segment log's running half: append, sync, read, consume. segment_log_open.cpp opens it.
#include "consumers/segment_log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "consumers/file_reaper.hpp"
#include "consumers/segment_log_format.hpp"
#include "runtime/crc32c.hpp"

namespace gatewayd::consumers {

namespace fmt = segment_log_format;

segment_log::segment_log(std::filesystem::path dir, segment_log_options options, int dir_fd)
    : dir_(std::move(dir)), options_(options), dir_fd_(dir_fd) {
  options_.write_buffer = std::max<std::size_t>(options_.write_buffer, 4096);
  buffer_.reserve(options_.write_buffer + header_bytes);
}

segment_log::~segment_log() {
  // No flush and no sync: what the owner did not sync() is left as a crash would leave it.
  for (const int fd : {dir_fd_, head_fd_, write_fd_, read_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

std::filesystem::path segment_log::segment_path(std::uint64_t number, const char* suffix) const {
  char name[40];
  std::snprintf(name, sizeof name, "%020llu%s", static_cast<unsigned long long>(number), suffix);
  return dir_ / name;
}

// A reaper unlinks it on its own thread; the rename first, so that the name it unlinks is one no
// new segment takes (a prepend numbers its file just below the head's: this one's number).
std::error_code segment_log::remove_segment(std::uint64_t number) {
  const std::filesystem::path path = segment_path(number);
  if (options_.reaper) {
    std::filesystem::path gone = segment_path(number, ".consumed");
    if (::rename(path.c_str(), gone.c_str()) == 0) {
      options_.reaper->remove(std::move(gone));
      return {};
    }
  }
  return ::unlink(path.c_str()) == 0 ? std::error_code{} : fmt::last_error();
}

std::error_code segment_log::open_segment(std::uint64_t number, bool create, int& fd) {
  const int flags = O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_TRUNC : 0);
  fd = ::open(segment_path(number).c_str(), flags, 0600);
  return fd < 0 ? fmt::last_error() : std::error_code{};
}

std::size_t segment_log::index_of(std::uint64_t number) const noexcept {
  const std::uint64_t guess = number - segments_.front().number;  // numbered consecutively
  if (guess < segments_.size() && segments_[guess].number == number) return guess;
  for (std::size_t i = 0; i < segments_.size(); ++i) {
    if (segments_[i].number == number) return i;
  }
  return segments_.size() - 1;
}

void segment_log::next_segment_if_at_end(position& at) const noexcept {
  for (std::size_t i = index_of(at.segment);
       i + 1 < segments_.size() && at.offset >= segments_[i].end; ++i)
    at = {segments_[i + 1].number, segments_[i + 1].begin};
}

std::error_code segment_log::append(std::span<const std::span<const std::byte>> records) {
  std::uint64_t payload = 0;
  for (const auto& r : records) {
    if (r.size() > max_record_bytes) return std::make_error_code(std::errc::message_size);
    payload += r.size();
  }
  if (records.empty()) return {};
  // A new file only between calls, so a failed call never has a segment of its own to undo.
  if (write_end() >= options_.segment_bytes) {
    if (auto ec = roll()) return ec;
  }
  const std::uint64_t start = write_end();
  const std::int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  for (const auto& r : records) {
    const std::size_t at = buffer_.size();
    buffer_.resize(at + header_bytes + r.size());
    fmt::encode(buffer_.data() + at, r, ms);
    if (buffer_.size() < options_.write_buffer) continue;
    if (auto ec = flush()) {
      // Undo this call: what an earlier flush of it wrote, and what it buffered.
      if (written_ > start) {
        // Shrinking needs no room; should it still fail (EIO), the next write overwrites
        // those records, though a crash before it could deliver them after all.
        (void)::ftruncate(write_fd_, static_cast<off_t>(start));
        written_ = start;
        buffer_.clear();
      } else {
        buffer_.resize(start - written_);
      }
      return ec;
    }
  }
  if (held_records_ == 0) head_ms_ = ms;
  held_records_ += records.size();
  held_bytes_ += payload;
  unread_records_ += records.size();
  segments_.back().end = write_end();
  return {};
}

// Writes the buffer at the segment's end. On an error the file is truncated back to what it
// held before (a partial write would otherwise be a torn record) and the buffer is kept.
std::error_code segment_log::flush() {
  std::size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::pwrite(write_fd_, buffer_.data() + done, buffer_.size() - done,
                               static_cast<off_t>(written_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::error_code ec =
          n < 0 ? fmt::last_error() : std::make_error_code(std::errc::io_error);
      if (done > 0) (void)::ftruncate(write_fd_, static_cast<off_t>(written_));
      return ec;
    }
    done += static_cast<std::size_t>(n);
  }
  written_ += done;
  data_dirty_ = data_dirty_ || done > 0;
  buffer_.clear();
  return {};
}

// Ends the current segment (written and made durable, so a later file never follows a torn
// one after a crash) and begins the next.
std::error_code segment_log::roll() {
  if (auto ec = flush()) return ec;
  if (data_dirty_ && ::fdatasync(write_fd_) != 0) return fmt::last_error();
  data_dirty_ = false;
  const std::uint64_t next = segments_.back().number + 1;
  int fd = -1;
  if (auto ec = open_segment(next, true, fd)) return ec;
  ::close(write_fd_);
  write_fd_ = fd;
  written_ = 0;
  segments_.push_back({next, 0});
  dir_dirty_ = true;
  return drop_consumed();
}

// The head's fdatasync is what a drain's syncs cost (appends have none then): 3 ms each on
// average here, up to 21 ms, one every spool_sync_ms, during which the spool thread reads
// nothing for its consumer. Written at every sync, a moved head is in the page cache at once, so
// a killed gateway resumes exactly where it was; only a power cut or a kernel crash may fall back
// to the last durable head, at most head_sync_interval older: more frames delivered twice, which
// at-least-once allows (wire-protocol.md, Spool). A prepend and a graceful stop make it durable
// now.
std::error_code segment_log::sync(head_durability head) {
  if (auto ec = flush()) return ec;
  if (data_dirty_ && ::fdatasync(write_fd_) != 0) return fmt::last_error();
  data_dirty_ = false;
  if (dir_dirty_ && ::fsync(dir_fd_) != 0) return fmt::last_error();
  if (dir_dirty_) removed_unsynced_ = false;
  dir_dirty_ = false;
  if (head_ != persisted_head_) {
    if (auto ec = write_head(head)) return ec;
  } else if (head_unsynced_ && (head == head_durability::now || head_sync_due())) {
    return sync_head();
  }
  return {};
}

std::error_code segment_log::sync_head() {
  if (::fdatasync(head_fd_) != 0) return fmt::last_error();
  head_unsynced_ = false;
  head_synced_at_ = std::chrono::steady_clock::now();
  return {};
}

bool segment_log::sync_due() const noexcept {
  return !buffer_.empty() || data_dirty_ || dir_dirty_ || head_ != persisted_head_ ||
         (head_unsynced_ && head_sync_due());
}

bool segment_log::head_sync_due() const noexcept {
  return std::chrono::steady_clock::now() - head_synced_at_ >= options_.head_sync_interval;
}

// The head file has two slots, 512 bytes apart, each [generation][segment][offset][crc]; a
// write goes to the slot not holding the newest generation, in place, and open() takes the
// valid slot with the higher generation. A torn write can only spoil the slot being written
// (each in a sector of its own), so the previous head survives it (and is only older:
// at-least-once). A file whose size never changes: its fdatasync writes no metadata, where
// write-temp-and-rename would cost that plus an fsync of the folder on every sync.
std::error_code segment_log::write_head(head_durability durability) {
  const fmt::head_slot slot =
      fmt::make_head_slot(head_generation_ + 1, head_.segment, head_.offset);
  const off_t at = static_cast<off_t>(((head_generation_ + 1) % 2) * fmt::head_slot_stride);
  const ssize_t n = ::pwrite(head_fd_, &slot, sizeof slot, at);
  if (n < 0) return fmt::last_error();
  if (n != static_cast<ssize_t>(sizeof slot)) return std::make_error_code(std::errc::io_error);
  ++head_generation_;
  persisted_head_ = head_;
  head_unsynced_ = true;
  if (durability == head_durability::when_due && !head_sync_due()) return {};
  return sync_head();
}

std::error_code segment_log::read(std::size_t max_bytes, std::vector<std::byte>& out,
                                  std::vector<std::uint32_t>& sizes) {
  struct appender final : record_sink {
    std::vector<std::byte>& out;
    std::vector<std::uint32_t>& sizes;
    appender(std::vector<std::byte>& o, std::vector<std::uint32_t>& s) : out(o), sizes(s) {}
    void take(std::span<const std::byte> payload) override {
      out.insert(out.end(), payload.begin(), payload.end());
      sizes.push_back(static_cast<std::uint32_t>(payload.size()));
    }
  } sink(out, sizes);
  return read(max_bytes, sink);
}

std::error_code segment_log::read(std::size_t max_bytes, record_sink& sink) {
  std::size_t got = 0;
  const auto take = [&](const std::byte* payload, std::uint32_t length, std::int64_t ms) {
    sink.take({payload, length});
    unconsumed_.push_back({length, ms});
    unconsumed_bytes_ += length;
    read_.offset += header_bytes + length;
    --unread_records_;
    got += length;
  };
  while (unread_records_ > 0) {
    next_segment_if_at_end(read_);
    record_view r;
    if (auto ec = record_at(read_, r)) return ec;
    if (got > 0 && got + r.length > max_bytes) break;
    const bool buffered = in_write_buffer(read_);  // as record_at() found it
    take(r.payload, r.length, r.ms);
    if (buffered) continue;
    // The records after it in the same window of its file (most of a read): checked and taken
    // in one walk, without looking the segment up again. One that the window does not hold
    // whole, or that may be the file's last, goes through record_at() (a refill, or the next
    // file, or torn).
    const std::size_t index = index_of(read_.segment);
    const std::uint64_t limit = index + 1 == segments_.size() ? written_ : segments_[index].end;
    const std::uint64_t end = std::min<std::uint64_t>(limit, read_buffer_at_ + read_buffer_.size());
    while (unread_records_ > 0 && end - read_.offset > header_bytes) {
      const std::byte* rec = window(read_.offset);
      const std::uint32_t length = fmt::length_of(rec);
      if (!fits(length, end - read_.offset)) break;
      if (got + length > max_bytes) return {};
      if (!fmt::checks(rec)) return std::make_error_code(std::errc::illegal_byte_sequence);
      take(rec + header_bytes, length, fmt::ms_of(rec));
    }
  }
  return {};
}

// The whole record at `at`: from the write buffer, or from its file through read_buffer_ with
// its checksum checked. A record that does not fit the file, or fails its checksum: EILSEQ.
std::error_code segment_log::record_at(const position& at, record_view& out) {
  const std::size_t index = index_of(at.segment);
  const segment_file& seg = segments_[index];
  const bool last = index + 1 == segments_.size();
  if (in_write_buffer(at)) {
    const std::byte* rec = buffer_.data() + (at.offset - written_);
    out = {rec + header_bytes, fmt::length_of(rec), fmt::ms_of(rec)};
    return {};
  }
  const std::uint64_t limit = last ? written_ : seg.end;
  const auto torn = [] { return std::make_error_code(std::errc::illegal_byte_sequence); };
  if (limit - at.offset < header_bytes) return torn();
  int fd = write_fd_;
  if (!last && read_fd_segment_ != at.segment) {
    if (read_fd_ >= 0) ::close(read_fd_);
    read_fd_ = ::open(segment_path(at.segment).c_str(), O_RDONLY | O_CLOEXEC);
    read_fd_segment_ = read_fd_ < 0 ? fmt::no_segment : at.segment;
    if (read_fd_ < 0) return fmt::last_error();
  }
  if (!last) fd = read_fd_;
  if (auto ec = fill(fd, at.segment, at.offset, header_bytes, limit)) return ec;
  const std::uint32_t length = fmt::length_of(window(at.offset));
  if (!fits(length, limit - at.offset)) return torn();
  if (auto ec = fill(fd, at.segment, at.offset, header_bytes + length, limit)) return ec;
  const std::byte* rec = window(at.offset);
  if (!fmt::checks(rec)) return torn();
  out = {rec + header_bytes, length, fmt::ms_of(rec)};
  return {};
}

// Makes read_buffer_ hold [offset, offset + want) of the segment, reading about a MiB ahead
// (never past limit, the end of the whole records in the file).
std::error_code segment_log::fill(int fd, std::uint64_t segment, std::uint64_t offset,
                                  std::size_t want, std::uint64_t limit) {
  if (read_buffer_segment_ == segment && offset >= read_buffer_at_ &&
      offset + want <= read_buffer_at_ + read_buffer_.size())
    return {};
  const std::size_t size = static_cast<std::size_t>(
      std::min<std::uint64_t>(limit - offset, std::max(want, fmt::read_ahead)));
  read_buffer_segment_ = fmt::no_segment;
  read_buffer_.resize(size);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n =
        ::pread(fd, read_buffer_.data() + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fmt::last_error();
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  if (done < want) return std::make_error_code(std::errc::illegal_byte_sequence);
  read_buffer_.resize(done);
  read_buffer_segment_ = segment;
  read_buffer_at_ = offset;
  return {};
}

std::error_code segment_log::consume(std::uint64_t n) {
  if (n > unconsumed_.size()) return std::make_error_code(std::errc::invalid_argument);
  std::error_code first;
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint32_t length = unconsumed_.front().length;
    unconsumed_.pop_front();
    unconsumed_bytes_ -= length;
    --held_records_;
    held_bytes_ -= length;
    head_.offset += header_bytes + length;
    // Only at a file's end is there a file to drop (most records are not a file's last).
    if (head_.offset < segments_.front().end) continue;
    if (auto ec = drop_consumed(); ec && !first) first = ec;
  }
  if (held_records_ == 0) {
    head_ms_.reset();
  } else if (!unconsumed_.empty()) {
    head_ms_ = unconsumed_.front().ms;
  } else {  // the head is the read cursor: its record's time from its header
    position at = head_;
    next_segment_if_at_end(at);
    record_view r;
    if (auto ec = record_at(at, r); ec && !first) first = ec;
    if (r.payload) head_ms_ = r.ms;
  }
  return first;
}

// Removes the segment files wholly before the head (never the one being written).
std::error_code segment_log::drop_consumed() {
  std::error_code first;
  while (segments_.size() > 1 && head_.segment == segments_.front().number &&
         head_.offset >= segments_.front().end) {
    const std::uint64_t number = segments_.front().number;
    if (read_fd_segment_ == number) {
      ::close(read_fd_);
      read_fd_ = -1;
      read_fd_segment_ = fmt::no_segment;
    }
    if (read_buffer_segment_ == number) read_buffer_segment_ = fmt::no_segment;
    if (auto ec = remove_segment(number); ec && !first) first = ec;
    segments_.pop_front();
    removed_unsynced_ = true;
    head_ = {segments_.front().number, segments_.front().begin};
    if (read_.segment == number) read_ = head_;
  }
  return first;
}

void segment_log::rewind(std::uint64_t keep) noexcept {
  keep = std::min<std::uint64_t>(keep, unconsumed_.size());
  // The cursor goes where read() left it after the kept records: the same walk from the head.
  position at = head_;
  for (std::uint64_t i = 0; i < keep; ++i) {
    next_segment_if_at_end(at);
    at.offset += header_bytes + unconsumed_[i].length;
  }
  read_ = at;
  for (std::size_t i = keep; i < unconsumed_.size(); ++i)
    unconsumed_bytes_ -= unconsumed_[i].length;
  unconsumed_.resize(keep);
  unread_records_ = held_records_ - keep;
}

std::optional<std::int64_t> segment_log::oldest_ms() const noexcept {
  return held_records_ > 0 ? head_ms_ : std::nullopt;
}

}  // namespace gatewayd::consumers
