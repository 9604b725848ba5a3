// The segment log's opening half: the folder, the head, and the scan that cuts a torn tail.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>

#include "consumers/segment_log.hpp"
#include "consumers/segment_log_format.hpp"

namespace gatewayd::consumers {

namespace fmt = segment_log_format;

namespace {

// Each missing folder of the path, 0700 (a spool holds other people's messages).
std::error_code make_dirs(const std::filesystem::path& dir) {
  std::filesystem::path prefix;
  for (const auto& part : dir) {
    prefix /= part;
    if (part.empty() || part == prefix.root_path()) continue;
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) return fmt::last_error();
  }
  return {};
}

// 00000000000000000042.seg -> 42
bool segment_number(const std::string& name, std::uint64_t& number) {
  if (name.size() != 24 || !name.ends_with(".seg")) return false;
  number = 0;
  for (std::size_t i = 0; i < 20; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    number = number * 10 + static_cast<std::uint64_t>(name[i] - '0');
  }
  return true;
}

}  // namespace

std::unique_ptr<segment_log> segment_log::open(const std::filesystem::path& dir,
                                               segment_log_options options,
                                               segment_log_opened& opened, std::error_code& ec) {
  opened = {};
  ec = make_dirs(dir);
  if (ec) return nullptr;
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) {
    ec = fmt::last_error();
    return nullptr;
  }
  std::unique_ptr<segment_log> log(new segment_log(dir, options, dir_fd));
  ec = log->load(opened);
  if (ec) return nullptr;
  return log;
}

std::error_code segment_log::load(segment_log_opened& opened) {
  std::vector<std::uint64_t> numbers;
  bool have_head = false;
  if (auto ec = load_segments(numbers)) return ec;
  if (auto ec = read_head(have_head)) return ec;
  if (auto ec = place_head(numbers, have_head)) return ec;
  if (auto ec = scan(opened)) return ec;
  read_ = head_;
  held_records_ = unread_records_ = opened.records;
  held_bytes_ = opened.bytes;
  return {};
}

std::error_code segment_log::load_segments(std::vector<std::uint64_t>& numbers) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::uint64_t number = 0;
    const std::string name = it->path().filename().string();
    if (segment_number(name, number)) {
      numbers.push_back(number);
    } else if (name.ends_with(".consumed")) {
      // A consumed segment its reaper never reached.
      if (::unlink(it->path().c_str()) != 0) return fmt::last_error();
      dir_dirty_ = true;
    }
  }
  std::sort(numbers.begin(), numbers.end());
  return ec;
}

// The newer of the head file's two valid slots (segment_log.cpp, write_head); a new head file
// is given its two empty slots.
std::error_code segment_log::read_head(bool& have) {
  head_fd_ = ::open((dir_ / "head").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (head_fd_ < 0) return fmt::last_error();
  struct stat st {};
  if (::fstat(head_fd_, &st) != 0) return fmt::last_error();
  if (static_cast<std::size_t>(st.st_size) < fmt::head_file_bytes) {
    if (::ftruncate(head_fd_, fmt::head_file_bytes) != 0) return fmt::last_error();
    dir_dirty_ = true;  // made durable, with the file's size, by the first sync()
  }
  std::array<fmt::head_slot, 2> slots{};
  for (std::size_t i = 0; i < 2; ++i) {
    const auto at = static_cast<off_t>(i * fmt::head_slot_stride);
    if (::pread(head_fd_, &slots[i], sizeof slots[i], at) != static_cast<ssize_t>(sizeof slots[i]))
      slots[i] = {};
    if (!fmt::valid(slots[i]) || (have && slots[i].generation < head_generation_)) continue;
    have = true;
    head_generation_ = slots[i].generation;
    head_ = {slots[i].segment, slots[i].offset};
  }
  if (have) persisted_head_ = head_;
  return {};
}

// Removes the segment files before the head (consumed: their unlink was lost in a crash) and
// opens the rest. A head whose file is gone points at consumed records only (a file is
// unlinked once the head passed it): the oldest file left is read from its first record.
std::error_code segment_log::place_head(const std::vector<std::uint64_t>& found, bool have_head) {
  if (!have_head) head_ = {found.empty() ? fmt::first_segment : found.front(), 0};
  std::vector<std::uint64_t> numbers;
  for (const std::uint64_t n : found) {
    if (n >= head_.segment) {
      numbers.push_back(n);
    } else if (::unlink(segment_path(n).c_str()) != 0) {
      return fmt::last_error();
    } else {
      dir_dirty_ = true;
    }
  }
  if (numbers.empty() || numbers.front() != head_.segment)
    head_ = {numbers.empty() ? head_.segment : numbers.front(), 0};
  if (numbers.empty()) {
    if (auto ec = open_segment(head_.segment, true, write_fd_)) return ec;
    numbers.push_back(head_.segment);
    dir_dirty_ = true;
  } else if (auto ec = open_segment(numbers.back(), false, write_fd_)) {
    return ec;
  }
  for (const std::uint64_t n : numbers) {
    std::error_code ec;
    const std::uint64_t size = std::filesystem::file_size(segment_path(n), ec);
    if (ec) return ec;
    segments_.push_back({n, size});
  }
  written_ = segments_.back().end;
  if (auto ec = load_begins()) return ec;
  const segment_file& front = segments_.front();
  head_.offset = std::min(std::max(head_.offset, front.begin), front.end);
  return {};
}

// Where each file's records held begin (segment_file::begin): a prepended file's own start is
// past its resume record, and the next file's is where that record says. prepend() only puts
// files in front, so the prepended ones come first: the walk stops at the first file without
// a resume record (one pread per prepended file, not one per file).
std::error_code segment_log::load_begins() {
  for (std::size_t i = 0; i < segments_.size(); ++i) {
    std::array<std::byte, fmt::resume_record_bytes> rec{};
    const int fd = ::open(segment_path(segments_[i].number).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fmt::last_error();
    const ssize_t n = ::pread(fd, rec.data(), rec.size(), 0);
    ::close(fd);
    std::uint64_t segment = 0, offset = 0;
    if (n != static_cast<ssize_t>(rec.size()) || !fmt::decode_resume(rec.data(), segment, offset))
      return {};
    segments_[i].begin = std::max<std::uint64_t>(segments_[i].begin, fmt::resume_record_bytes);
    if (i + 1 < segments_.size() && segments_[i + 1].number == segment)
      segments_[i + 1].begin = std::min(offset, segments_[i + 1].end);
  }
  return {};
}

// Every record from the head on, each checksum checked; the first that does not hold is cut
// with all that follows it.
std::error_code segment_log::scan(segment_log_opened& opened) {
  position at = head_;
  for (;;) {
    next_segment_if_at_end(at);
    if (at.offset >= segments_[index_of(at.segment)].end) return {};  // the end of the last segment
    record_view r;
    const std::error_code ec = record_at(at, r);
    if (ec == std::errc::illegal_byte_sequence) return cut(at, opened);
    if (ec) return ec;
    if (opened.records == 0) head_ms_ = r.ms;
    ++opened.records;
    opened.bytes += r.length;
    at.offset += header_bytes + r.length;
  }
}

// Truncates at's segment at `at`, removes the later ones, and makes the cut durable before
// anything is appended behind it.
std::error_code segment_log::cut(const position& at, segment_log_opened& opened) {
  std::uint64_t cut_bytes = 0;
  bool behind = false;
  for (const segment_file& s : segments_) {
    if (s.number == at.segment) behind = true;
    if (behind) cut_bytes += s.end - (s.number == at.segment ? at.offset : 0);
  }
  opened.torn_records_cut += 1;
  opened.torn_bytes_cut += cut_bytes;
  if (read_fd_ >= 0) ::close(read_fd_);
  read_fd_ = -1;
  read_fd_segment_ = read_buffer_segment_ = fmt::no_segment;
  while (segments_.back().number != at.segment) {
    if (::unlink(segment_path(segments_.back().number).c_str()) != 0) return fmt::last_error();
    segments_.pop_back();
    dir_dirty_ = true;
    if (write_fd_ >= 0) ::close(write_fd_);
    write_fd_ = -1;
  }
  if (write_fd_ < 0) {
    if (auto ec = open_segment(at.segment, false, write_fd_)) return ec;
  }
  if (::ftruncate(write_fd_, static_cast<off_t>(at.offset)) != 0 || ::fsync(write_fd_) != 0)
    return fmt::last_error();
  if (dir_dirty_ && ::fsync(dir_fd_) != 0) return fmt::last_error();
  dir_dirty_ = false;
  segments_.back().end = written_ = at.offset;
  return {};
}

}  // namespace gatewayd::consumers
