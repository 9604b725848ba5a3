#include "tools/gateway_peer/tls_stream.hpp"

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <cerrno>

namespace gatewayd::tools {

tls_stream::tls_stream(SSL_CTX* ctx, int fd, bool server, const std::string& server_name)
    : ssl_(SSL_new(ctx)), fd_(fd) {
  // Writes go through a buffer that write_all flushes once per call: one write() for a batch's
  // records. OpenSSL flushes it itself at the end of each handshake flight. The handshake reads
  // the socket as OpenSSL asks; buffer_reads() then gives reads a large buffer of their own.
  BIO* out = BIO_new(BIO_f_buffer());
  BIO_set_write_buffer_size(out, io_buffer_bytes + 4096);
  BIO_push(out, BIO_new_socket(fd, BIO_NOCLOSE));
  SSL_set_bio(ssl_, BIO_new_socket(fd, BIO_NOCLOSE), out);
  if (server) {
    SSL_set_accept_state(ssl_);
    return;
  }
  SSL_set_connect_state(ssl_);
  if (!server_name.empty()) {
    SSL_set_tlsext_host_name(ssl_, server_name.c_str());
    SSL_set1_host(ssl_, server_name.c_str());
  }
}

tls_stream::~tls_stream() {
  SSL_free(ssl_);
}

void tls_stream::take_error(const char* what) {
  const unsigned long e = ERR_peek_error();
  const char* r = e ? ERR_reason_error_string(e) : nullptr;
  error_ = std::string(what) + ": " + (r ? r : "connection closed");
  const long verify = SSL_get_verify_result(ssl_);
  if (verify != X509_V_OK)
    error_ += std::string(" (") + X509_verify_cert_error_string(verify) + ")";
  ERR_clear_error();
}

tls_stream::step tls_stream::handshake() {
  ERR_clear_error();
  const int r = SSL_do_handshake(ssl_);
  if (r == 1) {
    buffer_reads();
    return step::done;
  }
  const int e = SSL_get_error(ssl_, r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return step::again;
  take_error("TLS handshake failed");
  return step::failed;
}

// One read() fills a buffer with many records, which OpenSSL then takes a record at a time.
// (OpenSSL's own read-ahead does the same, but realigns what is left in its buffer at each
// record: with 256 KiB, ~7 times the bytes read went through memmove.)
void tls_stream::buffer_reads() {
  BIO* in = BIO_new(BIO_f_buffer());
  BIO_set_read_buffer_size(in, io_buffer_bytes);
  BIO_push(in, BIO_new_socket(fd_, BIO_NOCLOSE));
  SSL_set0_rbio(ssl_, in);
}

ssize_t tls_stream::read(void* buffer, std::size_t size) {
  drained_ = false;
  ERR_clear_error();
  std::size_t got = 0;
  if (SSL_read_ex(ssl_, buffer, size, &got) == 1) return static_cast<ssize_t>(got);
  switch (SSL_get_error(ssl_, 0)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
      drained_ = true;
      errno = EAGAIN;
      return -1;
    case SSL_ERROR_ZERO_RETURN:
      return 0;  // close_notify
    case SSL_ERROR_SYSCALL:
      if (errno == 0) return 0;  // the end of the stream without close_notify
      take_error("TLS read failed");
      return -1;
    default:
      take_error("TLS read failed");
      errno = EPROTO;
      return -1;
  }
}

bool tls_stream::write_all(std::string_view bytes, const std::atomic<bool>& stop,
                           std::error_code& ec) {
  while (!bytes.empty()) {
    ERR_clear_error();
    std::size_t wrote = 0;
    if (SSL_write_ex(ssl_, bytes.data(), bytes.size(), &wrote) == 1) {
      bytes.remove_prefix(wrote);
      continue;
    }
    const int e = SSL_get_error(ssl_, 0);
    if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
      // The send timeout ran out while the peer did not read: the same bytes again, unless we
      // are asked to stop.
      if (stop.load()) {
        ec = std::make_error_code(std::errc::operation_canceled);
        return false;
      }
      continue;
    }
    return failed_write(e, ec);
  }
  // The records sit in the write buffer: out with them, waiting as a write would.
  BIO* out = SSL_get_wbio(ssl_);
  while (BIO_flush(out) != 1) {
    if (!BIO_should_retry(out)) return failed_write(SSL_ERROR_SYSCALL, ec);
    if (stop.load()) {
      ec = std::make_error_code(std::errc::operation_canceled);
      return false;
    }
  }
  return true;
}

tls_stream::step tls_stream::put(std::string_view bytes) {
  ERR_clear_error();
  std::size_t wrote = 0;
  if (SSL_write_ex(ssl_, bytes.data(), bytes.size(), &wrote) == 1) return step::done;
  const int e = SSL_get_error(ssl_, 0);
  if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) return step::again;
  take_error("TLS write failed");
  return step::failed;
}

tls_stream::step tls_stream::put_some(std::string_view bytes, std::size_t& taken) {
  ERR_clear_error();
  taken = 0;
  if (SSL_write_ex(ssl_, bytes.data(), bytes.size(), &taken) == 1) return step::done;
  const int e = SSL_get_error(ssl_, 0);
  if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) return step::again;
  take_error("TLS write failed");
  return step::failed;
}

tls_stream::step tls_stream::flush() {
  BIO* out = SSL_get_wbio(ssl_);
  if (BIO_flush(out) == 1) return step::done;
  if (BIO_should_retry(out)) return step::again;
  take_error("TLS write failed");
  return step::failed;
}

bool tls_stream::failed_write(int ssl_error, std::error_code& ec) {
  take_error("TLS write failed");
  ec = ssl_error == SSL_ERROR_SYSCALL && errno != 0
           ? std::error_code(errno, std::system_category())
           : std::make_error_code(std::errc::protocol_error);
  return false;
}

void tls_stream::close_notify() noexcept {
  ERR_clear_error();
  SSL_shutdown(ssl_);
  BIO_flush(SSL_get_wbio(ssl_));
  ERR_clear_error();
}

}  // namespace gatewayd::tools
