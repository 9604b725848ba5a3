#include "net/tls_channel.hpp"

#include <openssl/err.h>

#include <asio/ssl/error.hpp>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "net/gathered_send.hpp"

namespace gatewayd::net {

namespace {

constexpr std::array<std::string_view, tls_records_count> records_names{"openssl", "kernel-send",
                                                                        "kernel"};
constexpr std::array<std::string_view, tls_error_count> error_names{
    "bad_record_mac", "record_overflow", "unexpected_message", "peer_alert",
    "truncated",      "slow_peer",       "kernel_key_update",  "other"};

class tls_error_category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "gatewayd.tls"; }
  std::string message(int value) const override {
    switch (static_cast<tls_error>(value)) {
      case tls_error::slow_peer:
        return "the peer did not take what TLS had to send in time";
      case tls_error::kernel_key_update:
        return "a TLS 1.3 KeyUpdate on a connection the kernel seals (OpenSSL 3.0 cannot move "
               "the kernel's key)";
      default:
        return std::string(to_string(static_cast<tls_error>(value)));
    }
  }
};

const tls_error_category& category() noexcept {
  static const tls_error_category c;
  return c;
}

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
  const std::error_code ec = r == 1 ? std::error_code{} : error_of(ssl, r, sys_errno);
  ERR_clear_error();  // what error_of did not take must not mislead the next call
  return ec;
}

}  // namespace

std::string_view to_string(tls_records r) noexcept {
  return records_names[static_cast<std::size_t>(r)];
}

std::string_view to_string(tls_error e) noexcept {
  return error_names[static_cast<std::size_t>(e)];
}

std::error_code make_error_code(tls_error e) noexcept {
  return {static_cast<int>(e), category()};
}

tls_error classify_tls_error(const std::error_code& ec) noexcept {
  if (ec.category() == category()) return static_cast<tls_error>(ec.value());
  if (ec == asio::ssl::error::stream_truncated || ec == asio::error::connection_reset ||
      ec == asio::error::broken_pipe || ec == asio::error::eof) {
    return tls_error::truncated;
  }
  if (ec.category() == asio::error::get_system_category()) {
    return ec.value() == ECONNRESET || ec.value() == EPIPE ? tls_error::truncated
                                                           : tls_error::other;
  }
  if (ec.category() != asio::error::get_ssl_category()) return tls_error::other;
  const int reason = ERR_GET_REASON(static_cast<unsigned long>(ec.value()));
  // OpenSSL reports a received alert as SSL_AD_REASON_OFFSET + the alert's code.
  if (reason >= SSL_AD_REASON_OFFSET) return tls_error::peer_alert;
  switch (reason) {
    case SSL_R_DECRYPTION_FAILED_OR_BAD_RECORD_MAC:
    case SSL_R_DECRYPTION_FAILED:
      return tls_error::bad_record_mac;
    case SSL_R_PACKET_LENGTH_TOO_LONG:
    case SSL_R_ENCRYPTED_LENGTH_TOO_LONG:
    case SSL_R_DATA_LENGTH_TOO_LONG:
    case SSL_R_RECORD_LENGTH_MISMATCH:
    case SSL_R_EXCESSIVE_MESSAGE_SIZE:
      return tls_error::record_overflow;
    case SSL_R_RECORD_TOO_SMALL:
    case SSL_R_TOO_MANY_WARN_ALERTS:
    case SSL_R_UNEXPECTED_MESSAGE:
    case SSL_R_UNEXPECTED_RECORD:
    case SSL_R_UNEXPECTED_CCS_MESSAGE:
    case SSL_R_BAD_RECORD_TYPE:
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_UNKNOWN_ALERT_TYPE:
    case SSL_R_INVALID_ALERT:
    case SSL_R_BAD_KEY_UPDATE:
    case SSL_R_EXTRA_DATA_IN_MESSAGE:
    case SSL_R_LENGTH_MISMATCH:
      return tls_error::unexpected_message;
    default:
      return tls_error::other;
  }
}

bool kernel_tls_loaded() {
  std::ifstream ulp("/proc/sys/net/ipv4/tcp_available_ulp");
  std::string name;
  while (ulp >> name) {
    if (name == "tls") return true;
  }
  return false;
}

std::shared_ptr<tls_channel> tls_channel::make(asio::ip::tcp::socket& socket, SSL_CTX* ctx, side s,
                                               bool kernel_tls, std::error_code& ec) {
  ERR_clear_error();
  // OpenSSL reads and writes the descriptor itself: it must never block.
  socket.native_non_blocking(true, ec);
  if (ec) return nullptr;
  SSL* ssl = SSL_new(ctx);
  BIO* bio = ssl ? BIO_new_socket(socket.native_handle(), BIO_NOCLOSE) : nullptr;
  if (!bio) {
    ec = {static_cast<int>(ERR_get_error()), asio::error::get_ssl_category()};
    ERR_clear_error();
    SSL_free(ssl);
    return nullptr;
  }
  SSL_set_bio(ssl, bio, bio);  // the SSL owns it, both ways
  std::shared_ptr<tls_channel> channel(new tls_channel(socket, ssl));
  // Partial writes: SSL_write_ex reports each record as it reaches the socket. A moving buffer:
  // a write retried after would_block passes the same bytes, not always from the same place.
  SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                        SSL_MODE_RELEASE_BUFFERS);
  // A read returns after each post-handshake message instead of looping while a peer streams
  // them: the pool thread goes back to the other connections (see the class comment).
  SSL_clear_mode(ssl, SSL_MODE_AUTO_RETRY);
  if (kernel_tls) {
    SSL_set_options(ssl, SSL_OP_ENABLE_KTLS);
    // Only to notice a KeyUpdate we send while the kernel seals: nothing else is looked at.
    SSL_set_msg_callback(ssl, &tls_channel::on_message);
    SSL_set_msg_callback_arg(ssl, channel.get());
  }
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

tls_records tls_channel::records() const noexcept {
  const bool send = BIO_get_ktls_send(SSL_get_wbio(ssl_)) != 0;
  const bool receive = BIO_get_ktls_recv(SSL_get_rbio(ssl_)) != 0;
  if (send && receive) return tls_records::kernel;
  return send ? tls_records::kernel_send : tls_records::openssl;
}

void tls_channel::on_message(int write_p, int, int content_type, const void* buf, std::size_t len,
                             SSL* ssl, void* arg) {
  if (!write_p || content_type != SSL3_RT_HANDSHAKE || len == 0) return;
  if (*static_cast<const unsigned char*>(buf) != SSL3_MT_KEY_UPDATE) return;
  if (!BIO_get_ktls_send(SSL_get_wbio(ssl))) return;
  static_cast<tls_channel*>(arg)->kernel_key_stale_ = true;
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
  if (ec == asio::error::would_block) {
    wait_ = SSL_want_write(ssl_) ? asio::socket_base::wait_write : asio::socket_base::wait_read;
    socket_.async_wait(wait_, [self = shared_from_this()](std::error_code e) {
      if (e) return self->finish_handshake(e);
      self->handshake_step();
    });
    return;
  }
  // OpenSSL wrote its last flight (or its alert) to the socket itself.
  asio::post(socket_.get_executor(),
             [self = shared_from_this(), ec] { self->finish_handshake(ec); });
}

void tls_channel::finish_handshake(std::error_code ec) {
  state_ = ec ? state::failed : state::open;
  auto done = std::move(handshake_done_);
  handshake_done_ = nullptr;
  done(ec);
}

void tls_channel::note_result(const std::error_code& ec) noexcept {
  if (ec == asio::error::would_block) {
    wait_ = SSL_want_write(ssl_) ? asio::socket_base::wait_write : asio::socket_base::wait_read;
  } else if (ec && ec != asio::error::eof) {
    state_ = state::failed;  // OpenSSL sent its alert, if it could; nothing more is sent
  }
}

std::size_t tls_channel::read_some(asio::mutable_buffer into, std::error_code& ec) {
  if (state_ == state::failed) {
    ec = asio::error::not_connected;
    return 0;
  }
  std::size_t n = 0;
  ec = perform(ssl_, [&] { return SSL_read_ex(ssl_, into.data(), into.size(), &n); });
  note_result(ec);
  return n;
}

std::size_t tls_channel::write_some(std::span<const iovec> pieces, std::error_code& ec) {
  ec.clear();
  if (state_ != state::open) {
    ec = asio::error::not_connected;
    return 0;
  }
  if (!BIO_get_ktls_send(SSL_get_wbio(ssl_))) return write_through_openssl(pieces, ec);
  if (kernel_key_stale_) {
    state_ = state::failed;
    ec = make_error_code(tls_error::kernel_key_update);
    return 0;
  }
  // The kernel seals whatever the socket is given: the plaintext path's write.
  const std::size_t n = gathered_send(socket_.native_handle(), pieces, ec);
  if (socket_full(ec)) {
    ec = asio::error::would_block;
    wait_ = asio::socket_base::wait_write;
  } else if (ec) {
    ec = {ec.value(), asio::error::get_system_category()};
  }
  return n;
}

std::size_t tls_channel::write_through_openssl(std::span<const iovec> pieces, std::error_code& ec) {
  std::size_t taken = 0;  // bytes of `pieces` OpenSSL reported written in this call
  // Where the next bytes to stage are: staged bytes OpenSSL has not reported lead `pieces`.
  std::size_t piece = 0;
  std::size_t offset = staged_.size() - staged_sent_;
  for (;;) {
    if (staged_sent_ == staged_.size()) {
      staged_.clear();
      staged_sent_ = 0;
      while (piece < pieces.size() && staged_.size() < stage_bytes) {
        const iovec& v = pieces[piece];
        if (offset >= v.iov_len) {
          offset -= v.iov_len;
          ++piece;
          continue;
        }
        const std::size_t n = std::min(v.iov_len - offset, stage_bytes - staged_.size());
        staged_.append(static_cast<const char*>(v.iov_base) + offset, n);
        offset += n;
      }
      if (staged_.empty()) return taken;
    }
    std::size_t n = 0;
    ec = perform(ssl_, [&] {
      return SSL_write_ex(ssl_, staged_.data() + staged_sent_, staged_.size() - staged_sent_, &n);
    });
    note_result(ec);
    if (ec) return taken;
    staged_sent_ += n;
    taken += n;
  }
}

void tls_channel::close_notify() noexcept {
  if (state_ != state::open) return;
  state_ = state::closed;
  ERR_clear_error();
  SSL_shutdown(ssl_);  // our half only: we do not wait for the peer's
  ERR_clear_error();
}

void tls_channel::release_buffers() noexcept {
  if (staged_sent_ == staged_.size()) {
    staged_.release();
    staged_sent_ = 0;
  }
}

}  // namespace gatewayd::net
