// Single-threaded by contract: one consumer's spool thread owns its segment_log; no locks inside.
//
// One consumer's spool on disk (issue 46, ../shared/design.md "Spool"): an append-only log of
// records in numbered segment files in one folder, read from the head, deleted from the head a
// whole segment file at a time (a file is never rewritten, only appended to or truncated at a
// torn tail).
//
// The folder holds:
//   00000000000000000042.seg   segments, by a zero-padded increasing number; a new one is begun
//                              by the first append() after the current one passed segment_bytes
//                              (a call's records never straddle two files, so a segment may
//                              pass segment_bytes by up to one call's worth); a new log's first
//                              is 2^40, and prepend() numbers its files below the head's, each
//                              opening with a resume record (segment_log_format.hpp) that says
//                              where in the next file reading goes on
//   head                       where the oldest record not yet consumed is, as of the last
//                              sync() (segment_log.cpp explains its two slots)
//   00000000000000000041.consumed
//                              a consumed segment renamed for a file_reaper to unlink (a crash
//                              may leave one: open() removes it)
// A record is [u32 length][u32 crc32c][i64 append time, ms since the epoch][payload], integers
// in the host's byte order (little-endian on every host gatewayd runs on; a spool is not moved
// between machines). The CRC32C covers the length's four bytes, the time and the payload.
//
// Durability: append() buffers; sync() makes everything appended durable, and the head as
// consumed so far. After a crash the log reopens at the last persisted head, so records consumed
// after the last sync() are delivered again: at-least-once, by design. A record appended and not
// synced may be lost, or survive whole; a torn one (a write cut short, a flipped bit) is found by
// its checksum at open() and cut, with everything after it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <system_error>
#include <vector>

namespace gatewayd::consumers {

class file_reaper;

struct segment_log_options {
  std::uint64_t segment_bytes = 64ull << 20;  // a new segment file once the current passes this
  std::size_t write_buffer = 1 << 20;         // appended bytes kept before a write()
  // Who unlinks consumed segment files (renamed to NNN.consumed first); null: consume() does.
  file_reaper* reaper = nullptr;
  // How long a head written by sync() may wait for its fdatasync (segment_log.cpp, sync).
  std::chrono::milliseconds head_sync_interval{1000};
};

// What open() found behind the persisted head.
struct segment_log_opened {
  std::uint64_t records = 0, bytes = 0;  // whole records held, their payload bytes
  // A torn or corrupt tail cut away: the record where the cut was made (one per cut; what
  // followed it cannot be framed with confidence) and every byte removed, later files included.
  std::uint64_t torn_records_cut = 0, torn_bytes_cut = 0;
};

class segment_log {
 public:
  // The largest record: a longer length field at open() marks a corrupt record.
  static constexpr std::uint32_t max_record_bytes = 64u << 20;
  static constexpr std::size_t header_bytes = 16;

  // Creates the folder (and missing parents, 0700) if missing; files are 0600. Scans from the
  // persisted head, checking every record's CRC; a torn or corrupt tail (short header, short
  // body, CRC mismatch, length over max_record_bytes) is cut: its segment truncated at the last
  // whole record and any later segment files removed, counted in `opened`. Segment files before
  // the head (consumed, their unlink lost in a crash) and .consumed files are removed. Returns null
  // and sets ec on an error it cannot recover from (EACCES, ENOTDIR, EIO...).
  static std::unique_ptr<segment_log> open(const std::filesystem::path& dir,
                                           segment_log_options options, segment_log_opened& opened,
                                           std::error_code& ec);
  ~segment_log();
  segment_log(const segment_log&) = delete;
  segment_log& operator=(const segment_log&) = delete;

  // Appends whole records (each one frame's bytes as delivered downstream) behind what the log
  // holds, all stamped with the wall-clock time of the call. Buffered: written with pwrite in
  // pieces of about write_buffer; durable only after sync(). All or nothing: on a write error
  // (ENOSPC, EIO) what this call wrote is truncated away, none of its records counts as
  // appended, and the error is returned; records of earlier calls stay held (still buffered if
  // they were, for the next write to retry). A record over max_record_bytes: EMSGSIZE, nothing
  // appended.
  std::error_code append(std::span<const std::span<const std::byte>> records);

  // Puts records in front of everything the log holds: read first, in their order, stamped with
  // the time of the oldest record held (they are older than it; now if it holds none). Only
  // when nothing is read and not consumed (after rewind()): EINVAL otherwise. Durable when it
  // returns: what was appended before is synced, then a new segment file numbered below the
  // head's is written and synced with the folder, then the head moved to it is persisted (a
  // crash before that leaves a file before the head, which open() removes). On an error
  // nothing changed (the new file is unlinked). Below segment 0: EOVERFLOW; a record over
  // max_record_bytes: EMSGSIZE. Rare (a failed write, an unacknowledged batch): one file each.
  std::error_code prepend(std::span<const std::span<const std::byte>> records);

  // Makes everything appended so far durable: writes the buffer, fdatasync of the open segment,
  // fsync of the folder if a segment file was created since the last sync, and the head written
  // if it moved: in the kernel's hands at once (a killed process loses none of it), durable on
  // disk now with head_durability::now, else within head_sync_interval (by a later sync()).
  enum class head_durability : std::uint8_t { when_due, now };
  std::error_code sync(head_durability head = head_durability::when_due);
  // sync() has something to do: appended bytes not yet durable, a folder change, a head moved or
  // written and due for its fdatasync.
  bool sync_due() const noexcept;
  // A head written and not yet durable (a later sync() makes it so).
  bool head_pending() const noexcept { return head_unsynced_; }

  // Where read() hands each record's payload, in order. The bytes are the log's (its read
  // window or its write buffer) and valid only during the call: copy what is kept.
  class record_sink {
   public:
    virtual void take(std::span<const std::byte> payload) = 0;

   protected:
    ~record_sink() = default;
  };

  // Reads whole records from the read cursor (which starts at the head) into `sink`: at most
  // max_bytes of payload, but at least one record if any is unread. Advances the read cursor
  // only. Records still in the write buffer are read from it. A record read from a file whose
  // CRC does not match: EILSEQ (the cursor stays on it; those before it were taken).
  std::error_code read(std::size_t max_bytes, record_sink& sink);
  // The same onto the end of `out`, contiguous, their sizes onto `sizes`.
  std::error_code read(std::size_t max_bytes, std::vector<std::byte>& out,
                       std::vector<std::uint32_t>& sizes);

  // The oldest n records (at the head, already read) are gone for good: the head advances,
  // segment files wholly before it are unlinked (or renamed and handed to the options' reaper);
  // the new head is persisted by the next sync().
  // More than were read and not consumed: EINVAL, nothing consumed.
  std::error_code consume(std::uint64_t n);

  // Reading starts over after the oldest `keep` records read and not consumed (still out: a
  // write on its way, acknowledgements awaited; at most those read), at the head with 0: what
  // was read after them and not consumed is read again.
  void rewind(std::uint64_t keep = 0) noexcept;

  std::uint64_t records() const noexcept { return held_records_; }  // appended, not consumed
  std::uint64_t bytes() const noexcept { return held_bytes_; }      // their payload bytes
  std::uint64_t unread_records() const noexcept { return unread_records_; }
  // Payload bytes of those (what a read can give at most).
  std::uint64_t unread_bytes() const noexcept { return held_bytes_ - unconsumed_bytes_; }
  // The append time of the record at the head, if the log holds any.
  std::optional<std::int64_t> oldest_ms() const noexcept;
  // Segment files on disk (the one being written included).
  std::size_t segment_files() const noexcept { return segments_.size(); }

 private:
  struct position {
    std::uint64_t segment = 0;  // a segment file's number
    std::uint64_t offset = 0;
    friend bool operator==(const position&, const position&) = default;
  };
  struct segment_file {
    std::uint64_t number = 0;
    std::uint64_t end = 0;  // bytes of whole records (the last one: in the file and buffered)
    // Where its records held start: past a prepended file's resume record, or, in the file a
    // prepend was put in front of, where the head was then (what came before was consumed).
    std::uint64_t begin = 0;
  };
  struct read_record {
    std::uint32_t length = 0;
    std::int64_t ms = 0;
  };
  struct record_view {
    const std::byte* payload = nullptr;
    std::uint32_t length = 0;
    std::int64_t ms = 0;
  };

  segment_log(std::filesystem::path dir, segment_log_options options, int dir_fd);

  // segment_log_open.cpp: the scan behind open().
  std::error_code load(segment_log_opened& opened);
  std::error_code load_segments(std::vector<std::uint64_t>& numbers);
  std::error_code place_head(const std::vector<std::uint64_t>& numbers, bool have_head);
  std::error_code scan(segment_log_opened& opened);
  std::error_code cut(const position& at, segment_log_opened& opened);
  std::error_code read_head(bool& have);
  std::error_code load_begins();

  // segment_log_prepend.cpp
  std::error_code write_prepended(std::uint64_t number, std::span<const std::byte> bytes);

  // segment_log.cpp
  std::error_code roll();
  std::error_code flush();
  std::error_code write_head(head_durability durability);
  bool head_sync_due() const noexcept;
  std::error_code sync_head();  // the head written, made durable
  std::error_code open_segment(std::uint64_t number, bool create, int& fd);
  std::error_code record_at(const position& at, record_view& out);
  // A record at `at` is still in the write buffer, not yet in its file.
  bool in_write_buffer(const position& at) const noexcept {
    return at.segment == segments_.back().number && at.offset >= written_;
  }
  // A record of `length` (its header says) is whole within `room` bytes from its start (at
  // least a header's), and not longer than any record may be.
  static bool fits(std::uint32_t length, std::uint64_t room) noexcept {
    return length <= max_record_bytes && room - header_bytes >= length;
  }
  std::error_code fill(int fd, std::uint64_t segment, std::uint64_t offset, std::size_t want,
                       std::uint64_t limit);
  const std::byte* window(std::uint64_t offset) const noexcept {
    return read_buffer_.data() + (offset - read_buffer_at_);
  }
  std::error_code drop_consumed();
  std::uint64_t write_end() const noexcept { return written_ + buffer_.size(); }
  std::size_t index_of(std::uint64_t number) const noexcept;  // in segments_
  std::filesystem::path segment_path(std::uint64_t number, const char* suffix = ".seg") const;
  std::error_code remove_segment(std::uint64_t number);
  void next_segment_if_at_end(position& at) const noexcept;

  std::filesystem::path dir_;
  segment_log_options options_;
  int dir_fd_ = -1;
  int head_fd_ = -1;
  int write_fd_ = -1;  // the last segment, O_RDWR: also read from
  int read_fd_ = -1;   // an older segment being read, or -1
  std::uint64_t read_fd_segment_ = ~std::uint64_t{0};

  std::deque<segment_file> segments_;  // oldest first; the last is written to
  std::uint64_t written_ = 0;          // bytes of the last segment in the file (buffer_ follows)
  std::vector<std::byte> buffer_;      // appended, not yet written
  bool data_dirty_ = false;            // written to the last segment since its fdatasync
  bool dir_dirty_ = false;             // the folder changed in a way the next sync() makes durable
  // A consumed segment file removed since the folder's last fsync: durable only before a
  // prepend (segment_log_prepend.cpp). Elsewhere it need not be: open() removes files before the
  // head, and reads a head whose file is gone from the oldest file left. And it costs: the
  // fsync then commits the journal with the removed file's freed blocks (24 ms measured).
  bool removed_unsynced_ = false;

  position head_;
  position persisted_head_{~std::uint64_t{0}, 0};  // none: the first sync() writes it
  bool head_unsynced_ = false;  // persisted_head_ written, its fdatasync still to come
  std::chrono::steady_clock::time_point head_synced_at_{};
  std::uint64_t head_generation_ = 0;  // the head file's slot generation, last written
  std::optional<std::int64_t> head_ms_;
  position read_;
  std::deque<read_record> unconsumed_;  // read and not consumed, oldest first
  std::uint64_t unconsumed_bytes_ = 0;  // their payload bytes

  std::uint64_t held_records_ = 0;
  std::uint64_t held_bytes_ = 0;
  std::uint64_t unread_records_ = 0;

  std::vector<std::byte> read_buffer_;  // a window of the file at read_buffer_at_
  std::uint64_t read_buffer_segment_ = ~std::uint64_t{0};  // none
  std::uint64_t read_buffer_at_ = 0;
};

}  // namespace gatewayd::consumers
