#include "net/tls13_record_reader.hpp"

#include <sys/socket.h>
#include <asio/error.hpp>
#include <asio/ssl/error.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace gatewayd::net {

namespace {

constexpr std::size_t largest_record = tls13_records::header_size + tls13_records::max_ciphertext;

}  // namespace

std::size_t tls13_record_reader::read(int fd, tls13_records& records, asio::mutable_buffer into,
                                      std::error_code& ec) {
  auto* out = static_cast<char*>(into.data());
  const std::size_t room = into.size();
  std::size_t n = unstage(out, room);
  ec = {};
  while (n < room && staged_.empty() && !failure_) {
    const char* record = in_.data() + in_begin_;
    const std::size_t held = in_.size() - in_begin_;
    const std::size_t size = tls13_records::record_size(record, held, failure_);
    if (failure_) break;
    if (!size || size > held) {
      if (n) break;  // the caller has plaintext to work on; the socket waits for the next call
      const std::error_code e = receive(fd);
      if (e == asio::error::would_block) {
        ec = e;
        return 0;
      }
      continue;
    }
    const std::size_t inner = size - tls13_records::header_size - tls13_records::tag_size;
    if (inner <= room - n) {
      n += records.open(record, size, out + n, failure_);
    } else if (n) {
      break;  // the next call opens it into a buffer with room
    } else {
      // Less room than a record (a small buffer, or the end of a chunk): open it aside.
      char* aside = staged_.extend(inner);
      const std::size_t got = records.open(record, size, aside, failure_);
      staged_.shrink(inner - got);
      if (failure_) staged_.clear();
      n = unstage(out, room);
    }
    in_begin_ += size;
  }
  if (n) return n;  // a failure waits until the plaintext before it is taken
  ec = failure_;
  return 0;
}

std::error_code tls13_record_reader::receive(int fd) {
  if (in_begin_ == in_.size()) {
    in_.clear();
    in_begin_ = 0;
  } else if (in_.capacity() - in_.size() < largest_record) {
    in_.erase_front(in_begin_);  // at most one partial record moves
    in_begin_ = 0;
  }
  // What the buffer has room for; a first buffer of buffer_bytes_ (the partial record that
  // compaction keeps leaves room for more than a record in it, so it never grows).
  std::size_t want = in_.capacity() - in_.size();
  if (want < largest_record) want = std::max(buffer_bytes_, 2 * largest_record);
  char* tail = in_.extend(want);
  const ssize_t got = ::recv(fd, tail, want, MSG_DONTWAIT);
  const int error = errno;
  in_.shrink(want - static_cast<std::size_t>(std::max<ssize_t>(got, 0)));
  if (got > 0 || (got < 0 && error == EINTR)) return {};  // EINTR: the caller reads again
  if (got < 0 && (error == EAGAIN || error == EWOULDBLOCK)) {
    if (in_.empty()) in_.release();  // an idle connection holds no buffer
    return asio::error::would_block;
  }
  if (got == 0) {
    failure_ = asio::ssl::error::stream_truncated;  // no close_notify came first
  } else {
    failure_ = {error, asio::error::get_system_category()};
  }
  return failure_;
}

std::size_t tls13_record_reader::unstage(char* into, std::size_t room) noexcept {
  const std::size_t n = std::min(staged_.size() - staged_begin_, room);
  if (n) std::memcpy(into, staged_.data() + staged_begin_, n);
  staged_begin_ += n;
  if (staged_begin_ == staged_.size()) {
    staged_.clear();
    staged_begin_ = 0;
  }
  return n;
}

}  // namespace gatewayd::net
