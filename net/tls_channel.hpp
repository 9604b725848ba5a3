// One TLS connection over a TCP socket: OpenSSL's handshake, then records sealed and opened by
// tls13_records (TLS 1.3) or by OpenSSL (TLS 1.2), either way sent a batch per syscall.
#pragma once

#include <openssl/ssl.h>

#include <asio.hpp>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <system_error>
#include <utility>

#include "net/byte_buffer.hpp"
#include "net/tls13_record_reader.hpp"
#include "net/tls13_records.hpp"
#include "net/tls_traffic_secrets.hpp"

namespace gatewayd::net {

// Why not asio::ssl::stream: its engine moves every byte through a 17 KiB BIO pair, so each
// 16 KiB record costs a syscall and two extra copies each way (perf: memmove 11 % of gatewayd's
// CPU, and three times the syscalls of plaintext per byte, in S1 with TLS on both legs). Here a
// read takes what the kernel holds (read-ahead into a 64 KiB buffer, one copy out of it as it is
// decrypted) and a write encrypts a whole batch into one buffer sent with one syscall. With
// TLS 1.3 (the usual case) the data phase is tls13_records': a read opens each record straight
// into the caller's buffer and a write seals the caller's frames where they lie. The handshake
// runs without read-ahead so that OpenSSL holds no record of the data phase when it ends; a
// context made without tls_traffic_secrets::install keeps OpenSSL's records throughout.
//
// Errors are Asio's for the same events (classify_tls_failure reads them): eof for the peer's
// close_notify, asio::ssl::error::stream_truncated for a connection that ended without one, the
// socket's errno (asio.system) for a failed socket, else OpenSSL's error in Asio's ssl category.
//
// Not thread-safe: one strand (or one thread at a time) drives it. Operations hold the channel
// (shared_from_this); the socket is the owner's and must outlive them, as with ssl::stream.
class tls_channel : public std::enable_shared_from_this<tls_channel> {
 public:
  enum class side { client, server };

  // Null with `ec` set if OpenSSL cannot make the connection's state.
  static std::shared_ptr<tls_channel> make(asio::ip::tcp::socket& socket, SSL_CTX* ctx, side s,
                                           std::error_code& ec);
  ~tls_channel();
  tls_channel(const tls_channel&) = delete;
  tls_channel& operator=(const tls_channel&) = delete;

  SSL* native_handle() const noexcept { return ssl_; }
  // True once the handshake handed the records to tls13_records.
  bool own_records() const noexcept { return records_ != nullptr; }

  // Handshakes on the socket's executor; `done` runs there once, with the outcome.
  void async_handshake(std::function<void(std::error_code)> done);

  // Non-blocking: plaintext into `into`, or asio::error::would_block when OpenSSL needs more
  // bytes from the socket (only then does it hold no whole record the kernel no longer shows).
  std::size_t read_some(asio::mutable_buffer into, std::error_code& ec);

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
    socket_.async_wait(
        asio::ip::tcp::socket::wait_read,
        [self = shared_from_this(), into, h = std::move(handler)](std::error_code e) mutable {
          if (e) return std::move(h)(e, std::size_t{0});
          self->async_read_some(into, std::move(h));
        });
  }

  // Sends close_notify, best effort and without waiting, so the peer tells our close from a cut
  // connection. Skipped while a write is out (its records would interleave) or mid-handshake.
  void close_notify() noexcept;

  // Encrypts all of `plain`, piece after piece (each into records of up to 16 KiB of its own),
  // and sends the records in one write; `handler(ec, n)` once the socket took them (n = the
  // pieces' total size) or failed (n = 0). One write at a time; reads may run meanwhile.
  // Returns true when the socket refused some of the records at first (the rest goes out as it
  // makes room): the slow-consumer clock's cue, as a plaintext write's partial send is.
  template <class Handler>
  bool async_write(std::span<const asio::const_buffer> plain, Handler handler) {
    std::error_code ec;
    const std::size_t total = seal(plain, ec);
    std::size_t sent = 0;
    if (!ec) {
      sending_.swap(out_);  // what reads add from here on waits in out_ for the next write
      sent = send_some(sending_.data(), sending_.size(), ec);
    }
    if (ec || sent == sending_.size()) {
      sending_.clear();
      asio::post(socket_.get_executor(), [h = std::move(handler), ec, n = total]() mutable {
        std::move(h)(ec, ec ? std::size_t{0} : n);
      });
      return false;
    }
    asio::async_write(socket_, asio::buffer(sending_.data() + sent, sending_.size() - sent),
                      [self = shared_from_this(), n = total, h = std::move(handler)](
                          std::error_code e, std::size_t) mutable {
                        self->sending_.clear();
                        std::move(h)(e, e ? std::size_t{0} : n);
                      });
    return true;
  }

 private:
  // Read-ahead: a read takes up to this much of what the kernel holds (four records), and stays
  // under glibc's mmap threshold; the buffer is freed while the connection is idle.
  static constexpr std::size_t read_buffer_bytes = 64 * 1024;

  tls_channel(asio::ip::tcp::socket& socket, SSL* ssl, side s)
      : socket_(socket), ssl_(ssl), side_(s) {}

  friend struct output_sink;
  // After a good handshake: tls13_records takes the records if it can, else OpenSSL reads ahead.
  void take_over_records();
  void handshake_step();
  void finish_handshake(std::error_code ec);
  // The handshake's records (or its alert) out, then `then` (on the socket's executor).
  void flush_then(std::function<void(std::error_code)> then);
  // All of `plain` into records in out_; the bytes taken.
  std::size_t seal(std::span<const asio::const_buffer> plain, std::error_code& ec);
  void encrypt(asio::const_buffer plain, std::error_code& ec);
  // Sends the KeyUpdate the peer asked for, if we owe one.
  void answer_key_update();
  // Sends what reads made OpenSSL write (a KeyUpdate answer), without waiting.
  void send_now();
  // One non-blocking send: the bytes the socket took (0 when full), or `ec` when it failed.
  std::size_t send_some(const char* data, std::size_t size, std::error_code& ec) noexcept;

  asio::ip::tcp::socket& socket_;
  SSL* ssl_;
  side side_;
  byte_buffer out_;      // records sealed, not yet handed to the socket
  byte_buffer sending_;  // records a write has out
  std::function<void(std::error_code)> handshake_done_;
  std::unique_ptr<tls_traffic_secrets> secrets_;  // during the handshake only
  std::unique_ptr<tls13_records> records_;        // null: OpenSSL's record layer
  tls13_record_reader reader_{read_buffer_bytes};
};

}  // namespace gatewayd::net
