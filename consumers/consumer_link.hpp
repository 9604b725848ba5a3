// A consumer's connection: dials its endpoint (then handshakes, for a TLS consumer), redials with
// capped jittered backoff, notices the peer leave, and moves to a new endpoint (or new TLS
// settings) on reload. Strand-only.
#pragma once

#include <array>
#include <asio.hpp>
#include <asio/ssl.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

#include "consumers/ack_reader.hpp"
#include "consumers/backoff.hpp"
#include "consumers/consumer_stats.hpp"
#include "consumers/consumer_tls.hpp"
#include "net/endpoint.hpp"
#include "net/tls_channel.hpp"
#include "runtime/executor.hpp"
#include "runtime/log_limit.hpp"

namespace gatewayd::consumers {

// What the link tells its consumer, on the consumer's strand.
class link_events {
 public:
  // Connection `conn` is up: the consumer may write to the socket.
  virtual void on_link_up(std::uint64_t conn) = 0;
  // The socket is about to close (lost, too slow, moved, shut): no write may start on it any
  // more, and one still running must be let go of first.
  virtual void on_link_down() = 0;
  // An `ack = true` consumer acknowledged the first `n` frames written on `conn` (up): whether
  // that is a number it may send (none), or why not. Only a link made with `acks` calls it.
  virtual ack_error on_ack(std::uint64_t /*conn*/, std::uint64_t /*n*/) { return ack_error::none; }
  // The owner (its shared_from_this()): every handler the link has out holds it, so that the
  // link, a part of it, outlives its operations.
  virtual std::shared_ptr<void> keep_alive() = 0;

 protected:
  ~link_events() = default;
};

// How long a dial may take (and, for a TLS consumer, its handshake after it: a bound of its own,
// the same length), and how long a connection may go unacknowledged (net/tcp_liveness)
// before the link gives up on it. Zero: no bound of ours (the kernel's, minutes to hours).
// `healthy_after`: how long a connection must stay up before the redial backoff starts over
// when it ends; one that ends sooner (a protocol error, a close right after the dial) makes the
// next redial wait longer, as a failed dial does.
// The first two come from gatewayd.toml (consumer_connect_timeout_ms, consumer_timeout_ms), with
// the configuration table's defaults (config/settings.cpp).
struct link_limits {
  std::chrono::milliseconds connect_timeout{};
  std::chrono::milliseconds liveness{};
  std::chrono::milliseconds healthy_after{1000};
};

class consumer_link {
 public:
  // `acks`: the consumer sends `ack` messages back (read and passed on); otherwise whatever
  // it sends is ignored.
  consumer_link(const runtime::strand& strand, const std::string& name, consumer_stats& stats,
                backoff redial, link_limits limits, link_events& events, bool acks = false);

  // Dials `at`, with TLS when `tls` is set.
  void start(const net::endpoint& at, std::optional<consumer_tls> tls);
  // A reload moved the consumer or changed its TLS settings: drop the current connection (if
  // any) and dial `at` at once.
  void move_to(const net::endpoint& at, std::optional<consumer_tls> tls);
  // A write on `conn` failed: the peer is gone; redial. Stale connection ids are ignored.
  void lost(std::uint64_t conn, std::error_code ec);
  // The disconnect policy threw `discarded` frames away: drop `conn` and redial.
  void drop_slow(std::uint64_t conn, std::uint64_t discarded);
  // For good: closes the socket and stops redialing.
  void shut();

  asio::ip::tcp::socket& socket() noexcept { return socket_; }
  // The TLS stream of the current connection; null for a plaintext one. Writers hold it (with
  // the shared_ptr) until their operation completed: the next connection makes a new one.
  const std::shared_ptr<net::tls_channel>& secure_stream() const noexcept { return stream_; }
  const net::endpoint& endpoint() const noexcept { return endpoint_; }
  bool up(std::uint64_t conn) const noexcept { return state_ == state::up && conn == conn_; }

  // Where the link is. Every change goes through enter(), which asserts this table
  // (may_enter(): public for its test; nothing else asks it):
  //   idle        -> dialing (start) | backing_off (a bad address) | shut
  //   dialing     -> handshaking (TLS) | up | backing_off (failed) | dialing (moved: a new dial) |
  //                  shut
  //   handshaking -> vetting (TLS 1.3) | up | backing_off (failed) | dialing (moved) | shut
  //   vetting     -> up (no refusal came) | backing_off (refused) | dialing (moved) | shut
  //   up          -> backing_off (lost, dropped, moved) | shut
  //   backing_off -> dialing (the redial, or moved) | backing_off (a loss's take_down, then the
  //                  redial's delay; a redial to a bad address) | shut
  //   shut        -> nothing: for good
  // vetting: TLS 1.3, our side of the handshake is done, but the consumer judges our
  // certificate only after it; frames wait until it had the time to refuse. backing_off: for the
  // redial's delay (backoff), no socket open.
  enum class state : std::uint8_t { idle, dialing, handshaking, vetting, up, backing_off, shut };
  static bool may_enter(state from, state to) noexcept;

 private:
  void enter(state next) noexcept;
  void dial();
  void on_dialed(std::error_code ec, std::uint64_t dial);
  void arm_deadline(std::chrono::milliseconds after, std::uint64_t dial);
  void handshake(std::uint64_t dial);
  void on_handshake(std::error_code ec, std::uint64_t dial);
  void handshake_failed(connect_failure reason, const std::string& why);
  std::chrono::milliseconds handshake_bound() const noexcept;
  void start_vetting(std::uint64_t dial);
  bool vetting(std::uint64_t conn) const noexcept {
    return state_ == state::vetting && conn == conn_ + 1;
  }
  // `read_pending`: the vetting read goes on as the connection's read_until_closed.
  void come_up(bool read_pending = false);
  void dial_failed(std::error_code ec);
  void wait_to_redial();
  void read_until_closed(std::uint64_t conn);
  void refused_after_handshake(std::uint64_t conn, std::error_code ec);
  // `n` bytes read from an `ack = true` consumer on `conn` (up): its acks passed on, or the
  // connection dropped for what is not one.
  void read_acks(std::uint64_t conn, std::size_t n);
  void protocol_error(std::uint64_t conn, ack_error why);
  // A TLS connection that was up ended other than by the consumer's close_notify.
  void count_tls_error(std::error_code ec);
  void drop(disconnect_reason reason, std::error_code ec = {});
  // `redials`: the link will dial again (every loss but shut()'s), counted as a reconnect.
  void take_down(bool redials = true);
  void account(disconnect_reason reason, std::error_code ec, std::uint64_t unacknowledged);
  void explain(std::error_code read_error);

  // A connection a write found already shut (EPIPE), waiting for its read to say why.
  struct unexplained_loss {
    std::uint64_t conn;
    std::error_code write_error;
    std::uint64_t unacknowledged;
  };
  void close_socket();

  const std::string& name_;
  consumer_stats& stats_;
  link_events& events_;  // the owner: what the link tells it, and what keeps it alive
  asio::ip::tcp::socket socket_;
  asio::steady_timer redial_timer_;  // the dial's deadline while dialing, else the redial delay
  backoff backoff_;
  link_limits limits_;
  net::endpoint endpoint_;
  state state_ = state::idle;
  std::uint64_t dial_ = 0;           // completions of superseded dials are ignored
  std::uint64_t conn_ = 0;           // the current connection
  std::uint32_t dial_failures_ = 0;  // since the last state change: logs once, not per retry
  // This consumer's own limit for those lines: another consumer failing in the same second
  // must not hide why this one fails (the journal is where an operator looks first).
  log::rate_limit failure_log_;
  // The current step's deadline (connect, or TLS handshake) closed the socket under it: its
  // handler then reports a timeout, not the abort. Reset as each step begins.
  bool step_timed_out_ = false;
  std::chrono::steady_clock::time_point dialed_at_{};  // the vetting time scales with it
  std::chrono::steady_clock::time_point up_since_{};   // the backoff resets once it is old

  // TLS consumers: every connection handshakes with tls_->context, over a stream of its own.
  std::optional<consumer_tls> tls_;
  std::shared_ptr<net::tls_channel> stream_;  // made anew for every connection
  std::optional<unexplained_loss> unexplained_;
  // Consumers without `ack` send nothing; whatever arrives lands in discard_, and past
  // max_unsolicited_bytes on one connection (unsolicited_, reset at each dial) it is a protocol
  // error: a consumer sending garbage made the gateway read 955 MB in 6 s (issue 42). Those with
  // it send acks, read by acks_ (one connection's, reset at each dial).
  static constexpr std::size_t max_unsolicited_bytes = 4096;
  std::array<char, 256> discard_{};
  std::size_t unsolicited_ = 0;
  std::optional<ack_reader> acks_;
};

}  // namespace gatewayd::consumers
