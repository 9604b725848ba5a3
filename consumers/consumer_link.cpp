// The link's life and its ends: start, move on reload, shut; every way a connection that was
// up ends, counted by reason. The way up is in consumer_link_dial.cpp, the read side in
// consumer_link_read.cpp.
#include "consumers/consumer_link.hpp"

#include <cassert>
#include <cerrno>

#include "consumers/link_errors.hpp"
#include "net/tcp_liveness.hpp"
#include "net/tls_context.hpp"
#include "runtime/log.hpp"
#include "runtime/log_limit.hpp"

namespace gatewayd::consumers {

consumer_link::consumer_link(const runtime::strand& strand, const std::string& name,
                             consumer_stats& stats, backoff redial, link_limits limits,
                             link_events& events, bool acks)
    : name_(name),
      stats_(stats),
      events_(events),
      socket_(strand),
      redial_timer_(strand),
      backoff_(std::move(redial)),
      limits_(limits) {
  if (acks) acks_.emplace();
}

// The table in consumer_link.hpp.
bool consumer_link::may_enter(state from, state to) noexcept {
  switch (from) {
    case state::idle:
      return to == state::dialing || to == state::backing_off || to == state::shut;
    case state::dialing:
      return to == state::handshaking || to == state::up || to == state::backing_off ||
             to == state::dialing || to == state::shut;
    case state::handshaking:
      return to == state::vetting || to == state::up || to == state::backing_off ||
             to == state::dialing || to == state::shut;
    case state::vetting:
      return to == state::up || to == state::backing_off || to == state::dialing ||
             to == state::shut;
    case state::up:
      return to == state::backing_off || to == state::shut;
    case state::backing_off:
      return to == state::dialing || to == state::backing_off || to == state::shut;
    case state::shut:
      return false;
  }
  return false;
}

// The one place the state changes: anything the table does not hold is a bug.
void consumer_link::enter(state next) noexcept {
  assert(may_enter(state_, next));
  state_ = next;
}

void consumer_link::start(const net::endpoint& at, std::optional<consumer_tls> tls) {
  endpoint_ = at;
  tls_ = std::move(tls);
  stats_.tls.store(tls_.has_value(), std::memory_order_relaxed);
  if (state_ == state::idle) dial();
}

void consumer_link::lost(std::uint64_t conn, std::error_code ec) {
  if (!up(conn)) return;  // already handled
  if (stream_ && ec != asio::error::eof) count_tls_error(ec);
  if (errno_of(ec) != EPIPE) {
    drop(disconnect_reason_of(ec), ec);
  } else {
    // A write found the connection shut already. The error that shut it (a timeout, a reset)
    // went to the read still out, which completes after the close below, with that error or
    // aborted: its handler names the reason.
    if (unexplained_) explain({});
    unexplained_ = unexplained_loss{conn, ec, net::unacknowledged_bytes(socket_.native_handle())};
    take_down();
  }
  wait_to_redial();
}

// One counter by reason and one rate-limited line of this consumer's own.
void consumer_link::count_tls_error(std::error_code ec) {
  const net::tls_error why = net::classify_tls_error(ec);
  stats_.tls_errors[static_cast<std::size_t>(why)].fetch_add(1, std::memory_order_relaxed);
  GW_LOG_LIMITED_BY(warning, failure_log_)
      << "consumer " << name_ << ": TLS connection to " << endpoint_.to_string() << " failed ("
      << net::to_string(why) << "): " << ec.message();
}

void consumer_link::explain(std::error_code read_error) {
  const auto loss = *unexplained_;
  unexplained_.reset();
  const auto told = disconnect_reason_of(read_error);
  const bool known = told == disconnect_reason::timed_out || told == disconnect_reason::reset;
  account(known ? told : disconnect_reason::reset, known ? read_error : loss.write_error,
          loss.unacknowledged);
}

void consumer_link::drop_slow(std::uint64_t conn, std::uint64_t discarded) {
  if (!up(conn)) return;
  GW_LOG_LIMITED(warning, "slow consumers disconnected")
      << "consumer " << name_ << " at " << endpoint_.to_string() << " is too slow: queue full, "
      << discarded << " frames discarded; disconnecting";
  stats_.last_error.set("too slow: queue full, " + std::to_string(discarded) +
                        " frames discarded; disconnected");
  drop(disconnect_reason::slow_consumer);
  wait_to_redial();
}

void consumer_link::move_to(const net::endpoint& at, std::optional<consumer_tls> tls) {
  endpoint_ = at;
  tls_ = std::move(tls);
  stats_.tls.store(tls_.has_value(), std::memory_order_relaxed);
  if (state_ == state::idle || state_ == state::shut) return;
  redial_timer_.cancel();
  if (state_ == state::up) drop(disconnect_reason::endpoint_changed);
  backoff_.reset();
  dial_failures_ = 0;
  dial();  // a new dial id: a connect still completing for the old address is ignored
  GW_LOG(info) << "consumer " << name_ << " endpoint or TLS settings changed; dialing "
               << endpoint_.to_string() << (tls_ ? " (TLS)" : "");
}

void consumer_link::shut() {
  if (state_ == state::up) {
    drop(disconnect_reason::closed);
  } else {
    close_socket();
  }
  enter(state::shut);
  ++dial_;
  redial_timer_.cancel();
}

void consumer_link::drop(disconnect_reason reason, std::error_code ec) {
  const std::uint64_t unacknowledged =
      loses_unacknowledged(reason) ? net::unacknowledged_bytes(socket_.native_handle()) : 0;
  take_down(reason != disconnect_reason::closed);
  account(reason, ec, unacknowledged);
}

// Closing cancels the pending read and any write; their handlers come back with
// operation_aborted, and the drain puts the unsent part of its batch back.
void consumer_link::take_down(bool redials) {
  if (std::chrono::steady_clock::now() - up_since_ >= limits_.healthy_after) backoff_.reset();
  events_.on_link_down();
  if (stream_) stream_->close_notify();  // a TLS consumer sees our close, not a cut
  close_socket();
  stats_.connected.store(false, std::memory_order_relaxed);
  stats_.tls_records.store(0, std::memory_order_relaxed);
  // Counted at the loss rather than at the next dial: the same once per loss, with no flag
  // carried to the dial.
  if (redials) stats_.reconnects.fetch_add(1, std::memory_order_relaxed);
  enter(state::backing_off);
  dial_failures_ = 0;
}

void consumer_link::account(disconnect_reason reason, std::error_code ec,
                            std::uint64_t unacknowledged) {
  stats_.disconnects[static_cast<std::size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
  if (unacknowledged)
    stats_.unacknowledged_bytes.fetch_add(unacknowledged, std::memory_order_relaxed);
  if (!loses_unacknowledged(reason)) return;
  stats_.last_error.set("lost its connection to " + endpoint_.to_string() + " (" +
                        std::string{to_string(reason)} + "): " + ec.message());
  GW_LOG_LIMITED(warning, "consumer connections lost")
      << "consumer " << name_ << " lost its connection to " << endpoint_.to_string() << " ("
      << to_string(reason) << "): " << ec.message() << "; " << unacknowledged
      << " bytes sent were not acknowledged; redialing";
}

void consumer_link::close_socket() {
  std::error_code ignored;
  socket_.close(ignored);
}

}  // namespace gatewayd::consumers
