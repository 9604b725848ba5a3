// The receiving half of a connection whose records tls13_records opens: reads the socket into a
// buffer of whole and partial records and opens each whole one straight into the caller's
// buffer.
#pragma once

#include <asio/buffer.hpp>
#include <cstddef>
#include <system_error>

#include "net/byte_buffer.hpp"
#include "net/tls13_records.hpp"

namespace gatewayd::net {

class tls13_record_reader {
 public:
  // `buffer_bytes`: how much one read of the socket takes at most (several records).
  explicit tls13_record_reader(std::size_t buffer_bytes) noexcept : buffer_bytes_(buffer_bytes) {}

  // Plaintext into `into` (n > 0) from the records in hand, reading `fd` without blocking when
  // none is whole. Else 0 and `ec`: would_block (nothing whole in hand, the socket empty), eof
  // (the peer's close_notify), asio::ssl::error::stream_truncated (the end of the stream
  // without one), the socket's errno, or a record's error (tls13_records::open). A failure is
  // reported once the plaintext before it is taken, and again on every later call.
  // A record larger than the room left is opened aside and handed out over the next calls.
  std::size_t read(int fd, tls13_records& records, asio::mutable_buffer into, std::error_code& ec);

 private:
  // One recv into in_: {} when bytes came, would_block, or the connection's end (failure_).
  std::error_code receive(int fd);
  std::size_t unstage(char* into, std::size_t room) noexcept;

  std::size_t buffer_bytes_;
  byte_buffer in_;  // records received, from in_begin_ on
  std::size_t in_begin_ = 0;
  byte_buffer staged_;  // an opened record's plaintext, from staged_begin_ on
  std::size_t staged_begin_ = 0;
  std::error_code failure_;
};

}  // namespace gatewayd::net
