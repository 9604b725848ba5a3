#include "net/tls_channel.hpp"

#include <openssl/bio.h>
#include <openssl/err.h>

#include <sys/socket.h>
#include <asio/ssl/error.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace gatewayd::net {

namespace {

// OpenSSL's answer to the call that returned `result`, as Asio would report it (see the class
// comment). `sys_errno`: errno right after the call.
std::error_code error_of(SSL* ssl, int result, int sys_errno) {
  const int ssl_error = SSL_get_error(ssl, result);
  const unsigned long e = ERR_get_error();
  switch (ssl_error) {
    case SSL_ERROR_NONE:
      return {};
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
      return asio::error::would_block;
    case SSL_ERROR_ZERO_RETURN:
      return asio::error::eof;
    case SSL_ERROR_SYSCALL:
      if (e) return {static_cast<int>(e), asio::error::get_ssl_category()};
      if (sys_errno) return {sys_errno, asio::error::get_system_category()};
      return asio::ssl::error::stream_truncated;
    default:
      if (ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING)
        return asio::ssl::error::stream_truncated;
      return {static_cast<int>(e ? e : ERR_PACK(ERR_LIB_SSL, 0, SSL_R_UNKNOWN_PROTOCOL)),
              asio::error::get_ssl_category()};
  }
}

// Runs one OpenSSL call (1 = done) on a clean error queue and reports it as error_of does.
template <class Call>
std::error_code perform(SSL* ssl, Call call) {
  ERR_clear_error();
  errno = 0;
  const int r = call();
  const int sys_errno = errno;
  return r == 1 ? std::error_code{} : error_of(ssl, r, sys_errno);
}

}  // namespace

// The write side's BIO: appends what OpenSSL writes to the channel's out_ (never blocks, so
// SSL_write takes a whole batch in one call).
struct output_sink {
  static int write(BIO* b, const char* data, std::size_t n, std::size_t* written) {
    auto* channel = static_cast<tls_channel*>(BIO_get_data(b));
    channel->out_.append(data, n);
    *written = n;
    return 1;
  }
  static long control(BIO*, int cmd, long, void*) {
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;  // flushed by the channel, after each call
  }
  static int create(BIO* b) {
    BIO_set_init(b, 1);
    return 1;
  }
  static BIO_METHOD* method() {
    static BIO_METHOD* const m = [] {
      BIO_METHOD* made =
          BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "gatewayd TLS output");
      BIO_meth_set_write_ex(made, &output_sink::write);
      BIO_meth_set_ctrl(made, &output_sink::control);
      BIO_meth_set_create(made, &output_sink::create);
      return made;
    }();
    return m;
  }
};

std::shared_ptr<tls_channel> tls_channel::make(asio::ip::tcp::socket& socket, SSL_CTX* ctx, side s,
                                               std::error_code& ec) {
  ERR_clear_error();
  // OpenSSL reads the descriptor itself: it must never block.
  socket.native_non_blocking(true, ec);
  if (ec) return nullptr;
  SSL* ssl = SSL_new(ctx);
  BIO* in = ssl ? BIO_new_socket(socket.native_handle(), BIO_NOCLOSE) : nullptr;
  BIO* out = in ? BIO_new(output_sink::method()) : nullptr;
  if (!out) {
    ec = {static_cast<int>(ERR_get_error()), asio::error::get_ssl_category()};
    BIO_free(in);
    SSL_free(ssl);
    return nullptr;
  }
  std::shared_ptr<tls_channel> channel(new tls_channel(socket, ssl, s));
  BIO_set_data(out, channel.get());
  SSL_set_bio(ssl, in, out);  // the SSL owns both
  channel->secrets_ = std::make_unique<tls_traffic_secrets>();
  channel->secrets_->watch(ssl);
  // No read-ahead until the handshake is over: OpenSSL then reads each handshake record
  // exactly, and leaves the first records of the data phase in the socket for tls13_records.
  SSL_set_read_ahead(ssl, 0);
  SSL_set_default_read_buffer_len(ssl, read_buffer_bytes);  // OpenSSL's, for TLS 1.2
  SSL_set_mode(ssl, SSL_MODE_RELEASE_BUFFERS);
  if (s == side::server) {
    SSL_set_accept_state(ssl);
  } else {
    SSL_set_connect_state(ssl);
  }
  return channel;
}

tls_channel::~tls_channel() {
  SSL_free(ssl_);
}

void tls_channel::take_over_records() {
  // OpenSSL must have nothing of ours left to send either.
  if (secrets_ && out_.empty() && sending_.empty()) {
    records_ = net::take_over_records(ssl_, *secrets_, side_ == side::server);
  }
  tls_traffic_secrets::stop_watching(ssl_);
  secrets_.reset();
  if (!records_) SSL_set_read_ahead(ssl_, 1);
}

void tls_channel::async_handshake(std::function<void(std::error_code)> done) {
  handshake_done_ = std::move(done);
  // The first step runs now, in the caller's handler: nothing can close the socket between
  // the call and OpenSSL's first write. It completes through an operation or a post, never
  // inline.
  handshake_step();
}

void tls_channel::handshake_step() {
  const std::error_code ec = perform(ssl_, [&] { return SSL_do_handshake(ssl_); });
  const bool again = ec == asio::error::would_block;
  // Our flight (or our alert) goes out first, whatever comes next.
  flush_then([self = shared_from_this(), ec, again](std::error_code write_error) {
    if (!again) return self->finish_handshake(ec ? ec : write_error);
    if (write_error) return self->finish_handshake(write_error);
    self->socket_.async_wait(asio::ip::tcp::socket::wait_read, [self](std::error_code e) {
      if (e) return self->finish_handshake(e);
      self->handshake_step();
    });
  });
}

void tls_channel::finish_handshake(std::error_code ec) {
  if (!ec) take_over_records();
  auto done = std::move(handshake_done_);
  handshake_done_ = nullptr;
  done(ec);
}

void tls_channel::flush_then(std::function<void(std::error_code)> then) {
  if (out_.empty()) {
    asio::post(socket_.get_executor(), [then = std::move(then)] { then({}); });
    return;
  }
  sending_.swap(out_);
  asio::async_write(
      socket_, asio::buffer(sending_.data(), sending_.size()),
      [self = shared_from_this(), then = std::move(then)](std::error_code e, std::size_t) {
        self->sending_.clear();
        then(e);
      });
}

std::size_t tls_channel::read_some(asio::mutable_buffer into, std::error_code& ec) {
  if (records_) {
    const std::size_t n = reader_.read(socket_.native_handle(), *records_, into, ec);
    if (records_->key_update_owed()) answer_key_update();
    return n;
  }
  std::size_t n = 0;
  ec = perform(ssl_, [&] { return SSL_read_ex(ssl_, into.data(), into.size(), &n); });
  if (!out_.empty()) send_now();
  return n;
}

std::size_t tls_channel::seal(std::span<const asio::const_buffer> plain, std::error_code& ec) {
  if (records_) {
    const std::size_t total = records_->seal(plain, out_, ec);
    return ec ? 0 : total;
  }
  std::size_t total = 0;
  for (const asio::const_buffer& piece : plain) {
    encrypt(piece, ec);
    if (ec) return 0;
    total += piece.size();
  }
  return total;
}

void tls_channel::answer_key_update() {
  std::error_code ec;
  records_->seal_owed_key_update(out_, ec);
  if (!ec) send_now();  // a failure to seal shows on the next write
}

void tls_channel::encrypt(asio::const_buffer plain, std::error_code& ec) {
  std::size_t n = 0;
  ec = perform(ssl_, [&] { return SSL_write_ex(ssl_, plain.data(), plain.size(), &n); });
  // The sink takes everything: a short write can only be a failed connection.
  if (!ec && n != plain.size()) ec = asio::ssl::error::unexpected_result;
}

void tls_channel::close_notify() noexcept {
  if (!sending_.empty() || SSL_in_init(ssl_)) return;
  if (records_) {
    std::error_code ignored;  // best effort, as below
    records_->seal_close_notify(out_, ignored);
    if (!out_.empty()) send_now();
    return;
  }
  ERR_clear_error();
  SSL_shutdown(ssl_);  // our half only: we do not wait for the peer's
  ERR_clear_error();
  if (!out_.empty()) send_now();
}

void tls_channel::send_now() {
  if (!sending_.empty()) return;  // a write is out: the next one carries these records first
  std::error_code ignored;        // a broken connection shows on the next read or write
  const std::size_t n = send_some(out_.data(), out_.size(), ignored);
  out_.erase_front(n);
}

std::size_t tls_channel::send_some(const char* data, std::size_t size,
                                   std::error_code& ec) noexcept {
  // Not socket_.send: Asio's synchronous send waits for room on a socket it drives itself.
  const ssize_t n = ::send(socket_.native_handle(), data, size, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n >= 0) return static_cast<std::size_t>(n);
  if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
    ec = {errno, asio::error::get_system_category()};
  }
  return 0;
}

}  // namespace gatewayd::net
