// One TLS connection over a socket its caller owns, on OpenSSL's records: the handshake, reads
// shaped like ::read() (so the frame reader takes them as they are), and whole writes that
// look at a stop flag while the peer does not read.
#pragma once

#include <openssl/ssl.h>
#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

namespace gatewayd::tools {

class tls_stream {
 public:
  // Records are gathered up to this much before they go to the socket in one write, and a read
  // takes up to this much: a syscall per 16 KiB record would cost more than the crypto.
  static constexpr long io_buffer_bytes = 256 * 1024;

  // `server_name`, for a client: sent as SNI and required in the peer's certificate.
  tls_stream(SSL_CTX* ctx, int fd, bool server, const std::string& server_name = "");
  ~tls_stream();
  tls_stream(const tls_stream&) = delete;
  tls_stream& operator=(const tls_stream&) = delete;

  enum class step { done, again, failed };
  // One step of the handshake on a non-blocking socket: `again` until it is done (call again
  // when the socket is readable). On a blocking socket it completes or fails in one call.
  step handshake();
  // Why the handshake or the connection failed (OpenSSL's reason, and the verify result).
  const std::string& error() const noexcept { return error_; }

  // As ::read: bytes > 0; 0 at the peer's close_notify or end of stream; -1 with errno set,
  // EAGAIN when OpenSSL needs more bytes from the socket (then drained() is true).
  ssize_t read(void* buffer, std::size_t size);
  bool drained() const noexcept { return drained_; }

  // Writes all of `bytes` (OpenSSL cuts them into 16 KiB records: no write per frame). False
  // with `ec` set when the connection failed, or operation_canceled once `stop` is set while a
  // write waits (the socket's send timeout wakes it).
  bool write_all(std::string_view bytes, const std::atomic<bool>& stop, std::error_code& ec);
  // Small writes that never wait, for a non-blocking socket (a consumer's acks): put() hands
  // `bytes` to OpenSSL, whose records wait in the write buffer (`again`: call it again with the
  // same bytes); flush() sends what the buffer holds as far as the socket takes it (`again`:
  // some is left for the next flush()).
  step put(std::string_view bytes);
  // As put(), for writes larger than a record (a confirm-mode sender's batches): OpenSSL takes
  // them in part (SSL_MODE_ENABLE_PARTIAL_WRITE); `taken` says how much, the rest goes next.
  step put_some(std::string_view bytes, std::size_t& taken);
  step flush();
  // Sends close_notify (best effort) so the peer tells our end from a cut connection.
  void close_notify() noexcept;

 private:
  void take_error(const char* what);
  bool failed_write(int ssl_error, std::error_code& ec);
  // After a good handshake: reads go through a buffer of io_buffer_bytes.
  void buffer_reads();

  SSL* ssl_;
  int fd_;
  std::string error_;
  bool drained_ = false;
};

}  // namespace gatewayd::tools
