#include "tools/gateway_peer/tls_stream.hpp"

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <sys/socket.h>
#include <asio/error.hpp>
#include <asio/ssl/error.hpp>

#include <cerrno>

namespace gatewayd::tools {

tls_stream::tls_stream(SSL_CTX* ctx, int fd, bool server, const std::string& server_name)
    : ssl_(SSL_new(ctx)), fd_(fd), server_(server) {
  // Writes go through a buffer that write_all flushes once per call: one write() for a batch's
  // records. OpenSSL flushes it itself at the end of each handshake flight.
  // The handshake reads the socket as OpenSSL asks, record by record, so that nothing of the
  // data phase is read before tls13_records can take it (take_over).
  BIO* in = BIO_new_socket(fd, BIO_NOCLOSE);
  secrets_ = std::make_unique<net::tls_traffic_secrets>();
  secrets_->watch(ssl_);
  BIO* out = BIO_new(BIO_f_buffer());
  BIO_set_write_buffer_size(out, io_buffer_bytes + 4096);
  BIO_push(out, BIO_new_socket(fd, BIO_NOCLOSE));
  SSL_set_bio(ssl_, in, out);
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
    take_over();
    return step::done;
  }
  const int e = SSL_get_error(ssl_, r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return step::again;
  take_error("TLS handshake failed");
  return step::failed;
}

void tls_stream::take_over() {
  if (secrets_ && BIO_wpending(SSL_get_wbio(ssl_)) == 0) {
    records_ = net::take_over_records(ssl_, *secrets_, server_);
  }
  net::tls_traffic_secrets::stop_watching(ssl_);
  secrets_.reset();
  if (records_) return;
  // OpenSSL's records: one read() fills a buffer with many, which OpenSSL then takes a record at
  // a time. (OpenSSL's own read-ahead does the same, but realigns what is left in its buffer at
  // each record: with 256 KiB, ~7 times the bytes read went through memmove.)
  BIO* in = BIO_new(BIO_f_buffer());
  BIO_set_read_buffer_size(in, io_buffer_bytes);
  BIO_push(in, BIO_new_socket(fd_, BIO_NOCLOSE));
  SSL_set0_rbio(ssl_, in);
}

ssize_t tls_stream::read_records(void* buffer, std::size_t size) {
  std::error_code ec;
  const std::size_t n = reader_.read(fd_, *records_, asio::buffer(buffer, size), ec);
  if (records_->key_update_owed()) {
    std::error_code ignored;  // a broken connection shows on the next read
    records_->seal_owed_key_update(out_, ignored);
    send_records(nullptr, ignored);
  }
  if (n) return static_cast<ssize_t>(n);
  if (ec == asio::error::would_block) {
    drained_ = true;
    errno = EAGAIN;
    return -1;
  }
  if (ec == asio::error::eof || ec == asio::ssl::error::stream_truncated) return 0;
  error_ = "TLS read failed: " + ec.message();
  errno = ec.category() == asio::error::get_system_category() ? ec.value() : EPROTO;
  return -1;
}

bool tls_stream::send_records(const std::atomic<bool>* stop, std::error_code& ec) {
  while (out_sent_ < out_.size()) {
    // Blocking sockets (the sender) wait up to their send timeout; the receiver's do not wait.
    const ssize_t n = ::send(fd_, out_.data() + out_sent_, out_.size() - out_sent_,
                             MSG_NOSIGNAL | (stop ? 0 : MSG_DONTWAIT));
    if (n > 0) {
      out_sent_ += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!stop) return true;  // the rest goes with the next write
      if (stop->load()) {
        ec = std::make_error_code(std::errc::operation_canceled);
        return false;
      }
      continue;
    }
    ec = std::error_code(n < 0 ? errno : EPIPE, std::system_category());
    error_ = "TLS write failed: " + ec.message();
    return false;
  }
  out_.clear();
  out_sent_ = 0;
  return true;
}

ssize_t tls_stream::read(void* buffer, std::size_t size) {
  drained_ = false;
  if (records_) return read_records(buffer, size);
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
  if (records_) {
    const asio::const_buffer plain(bytes.data(), bytes.size());
    records_->seal({&plain, 1}, out_, ec);
    if (ec) {
      error_ = "TLS write failed: " + ec.message();
      return false;
    }
    return send_records(&stop, ec);
  }
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

bool tls_stream::failed_write(int ssl_error, std::error_code& ec) {
  take_error("TLS write failed");
  ec = ssl_error == SSL_ERROR_SYSCALL && errno != 0
           ? std::error_code(errno, std::system_category())
           : std::make_error_code(std::errc::protocol_error);
  return false;
}

void tls_stream::close_notify() noexcept {
  if (records_) {
    std::error_code ignored;  // best effort, as below
    records_->seal_close_notify(out_, ignored);
    send_records(nullptr, ignored);
    return;
  }
  ERR_clear_error();
  SSL_shutdown(ssl_);
  BIO_flush(SSL_get_wbio(ssl_));
  ERR_clear_error();
}

}  // namespace gatewayd::tools
