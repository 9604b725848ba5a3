// One TLS connection over a TCP socket, driven without blocking from one strand: OpenSSL's
// handshake and OpenSSL's record layer, or the kernel's where the host offers TLS offload.
#pragma once

#include <openssl/ssl.h>
#include <sys/uio.h>

#include <asio.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <system_error>

#include "net/byte_buffer.hpp"

namespace gatewayd::net {

// Who seals and opens a connection's records once its handshake is over. OpenSSL 3.0 offloads
// TLS 1.2 both ways and TLS 1.3 only in the sending direction (kernel_send).
enum class tls_records : std::uint8_t { openssl, kernel_send, kernel };
inline constexpr std::size_t tls_records_count = 3;
// The metric label and /connz value: "openssl", "kernel-send", "kernel".
std::string_view to_string(tls_records r) noexcept;

// Why an established TLS connection ended other than by an orderly close: the `reason` label of
// gatewayd_tls_errors_total.
enum class tls_error : std::uint8_t {
  bad_record_mac,      // a record failed its integrity check (tampering, or the wrong key)
  record_overflow,     // a record longer than TLS allows
  unexpected_message,  // a record or message out of place, incl. OpenSSL's floods of empty
                       // records (33 in a row) and warning alerts (5 in a row)
  peer_alert,          // the peer ended it with a fatal alert
  truncated,           // the connection ended (FIN or reset) without close_notify
  slow_peer,           // the peer did not take what OpenSSL had to send (see the owners)
  kernel_key_update,   // TLS 1.3 KeyUpdate on a kernel-sealed connection (OpenSSL 3.0 cannot
                       // move the kernel's key): ended before a record goes out under a stale key
  other,
};
inline constexpr std::size_t tls_error_count = 8;
std::string_view to_string(tls_error e) noexcept;
// The reason of an error a tls_channel operation reported (not would_block, not eof).
tls_error classify_tls_error(const std::error_code& ec) noexcept;
// The errors the channel makes itself, in its own category.
std::error_code make_error_code(tls_error e) noexcept;

// True when this host's kernel has the TLS upper-layer protocol loaded
// (/proc/sys/net/ipv4/tcp_available_ulp lists "tls"). An unprivileged process cannot load it:
// `modprobe tls` (or /etc/modules-load.d) does.
bool kernel_tls_loaded();

// The socket is OpenSSL's BIO in both directions (never a memory BIO): that is what lets
// SSL_OP_ENABLE_KTLS hand the records to the kernel, and it spares a copy per byte each way.
// A write hands OpenSSL up to stage_bytes at once, copied together from the caller's pieces
// (frames lying apart), which OpenSSL cuts into 16 KiB records; SSL_MODE_ENABLE_PARTIAL_WRITE
// reports each record as it reaches the socket, so a frame counts as written once its record
// did, as on a plaintext socket. With the kernel sealing, a write is the plaintext path's
// gathered sendmsg. Reads take plaintext straight into the caller's buffer (OpenSSL decrypts
// in its own read buffer and copies out once). SSL_MODE_RELEASE_BUFFERS gives OpenSSL's
// buffers back between records, and the staging buffer goes with release_buffers(): an idle
// connection holds neither.
//
// Limits are OpenSSL's: 32 empty records or 5 warning alerts in a row are fatal, a record
// longer than 2^14 (+ expansion) is fatal, and SSL_MODE_AUTO_RETRY is off, so a read returns
// after each post-handshake message it processed (tickets, KeyUpdates) instead of looping
// while a peer streams them. What OpenSSL must send while reading (a KeyUpdate answer) waits
// in its own buffer (one record) when the socket is full: the read then reports would_block
// with wait_for() == wait_write, and the owner bounds how long it waits (slow_peer).
//
// Errors are Asio's for the same events: eof for the peer's close_notify,
// asio::ssl::error::stream_truncated for a connection that ended without one, the socket's
// errno (asio.system), else OpenSSL's error in Asio's ssl category, or this file's tls_error
// category. After a fatal error OpenSSL has sent its alert; the channel refuses to go on.
//
// Not thread-safe: one strand drives it. Operations hold the channel (shared_from_this); the
// socket is the owner's and must outlive them.
class tls_channel : public std::enable_shared_from_this<tls_channel> {
 public:
  enum class side { client, server };
  // A write gives OpenSSL at most this much at once (four records).
  static constexpr std::size_t stage_bytes = 64 * 1024;

  // `kernel_tls`: offer OpenSSL the kernel's record layer (used only where the host's kernel
  // and the negotiated suite allow it; otherwise OpenSSL's). Null with `ec` set if OpenSSL
  // cannot make the connection's state.
  static std::shared_ptr<tls_channel> make(asio::ip::tcp::socket& socket, SSL_CTX* ctx, side s,
                                           bool kernel_tls, std::error_code& ec);
  ~tls_channel();
  tls_channel(const tls_channel&) = delete;
  tls_channel& operator=(const tls_channel&) = delete;

  SSL* native_handle() const noexcept { return ssl_; }
  // Meaningful once the handshake succeeded.
  tls_records records() const noexcept;

  // Handshakes on the socket's executor; `done` runs there once, with the outcome.
  void async_handshake(std::function<void(std::error_code)> done);

  // Non-blocking: plaintext into `into`; asio::error::would_block when OpenSSL must wait for
  // the socket (wait_for() says for what): only then does it hold no bytes the kernel no
  // longer shows.
  std::size_t read_some(asio::mutable_buffer into, std::error_code& ec);

  // Non-blocking: writes `pieces` in order, returning how many bytes went out (whole records);
  // asio::error::would_block when the socket is full (wait for wait_for(), then call again
  // with the pieces not yet written: they start with the bytes OpenSSL was given).
  std::size_t write_some(std::span<const iovec> pieces, std::error_code& ec);

  // The readiness the last would_block waits for.
  asio::socket_base::wait_type wait_for() const noexcept { return wait_; }

  // As socket.async_read_some: `handler(ec, n)` on the socket's executor.
  template <class Handler>
  void async_read_some(asio::mutable_buffer into, Handler handler) {
    std::error_code ec;
    const std::size_t n = read_some(into, ec);
    if (ec != asio::error::would_block) {
      asio::post(socket_.get_executor(),
                 [h = std::move(handler), ec, n]() mutable { std::move(h)(ec, n); });
      return;
    }
    socket_.async_wait(wait_, [self = shared_from_this(), into,
                               h = std::move(handler)](std::error_code e) mutable {
      if (e) return std::move(h)(e, std::size_t{0});
      self->async_read_some(into, std::move(h));
    });
  }

  // Sends close_notify, best effort and without waiting, so the peer tells our close from a cut
  // connection. Only on an open connection: never after a fatal error or mid-handshake.
  void close_notify() noexcept;

  // Gives back the write staging buffer (the writer calls it when it has nothing to send).
  void release_buffers() noexcept;

 private:
  enum class state : std::uint8_t { handshaking, open, failed, closed };

  tls_channel(asio::ip::tcp::socket& socket, SSL* ssl) : socket_(socket), ssl_(ssl) {}

  void handshake_step();
  void finish_handshake(std::error_code ec);
  // The outcome of an OpenSSL call: would_block sets wait_; a fatal error moves to failed.
  void note_result(const std::error_code& ec) noexcept;
  std::size_t write_through_openssl(std::span<const iovec> pieces, std::error_code& ec);
  static void on_message(int write_p, int version, int content_type, const void* buf,
                         std::size_t len, SSL* ssl, void* arg);

  asio::ip::tcp::socket& socket_;
  SSL* ssl_;
  state state_ = state::handshaking;
  asio::socket_base::wait_type wait_ = asio::socket_base::wait_read;
  std::function<void(std::error_code)> handshake_done_;
  // Bytes of the caller's pieces handed to OpenSSL by SSL_write_ex; from staged_sent_ on, the
  // ones it has not reported written (a retry must give it the same bytes again).
  byte_buffer staged_;
  std::size_t staged_sent_ = 0;
  // The kernel seals our records and OpenSSL wrote a KeyUpdate: its sending key moved, the
  // kernel's did not; nothing more may be sent.
  bool kernel_key_stale_ = false;
};

}  // namespace gatewayd::net

template <>
struct std::is_error_code_enum<gatewayd::net::tls_error> : std::true_type {};
