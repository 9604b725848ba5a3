#include "consumers/consumer_link.hpp"

#include <algorithm>
#include <cerrno>

#include "consumers/tls_dial_failure.hpp"
#include "net/tcp_liveness.hpp"
#include "net/tls_context.hpp"
#include "runtime/log.hpp"
#include "runtime/log_limit.hpp"

namespace gatewayd::consumers {

namespace {

// The errno behind `ec`, or 0. The drain's own writes report std::system_category(), Asio's
// operations its "asio.system" category: an Asio enum compares equal to only one of the two.
int errno_of(std::error_code ec) {
  if (ec.category() == std::system_category() ||
      ec.category() == asio::error::get_system_category())
    return ec.value();
  return 0;
}

disconnect_reason reason_of(std::error_code ec) {
  if (ec == asio::error::eof) return disconnect_reason::peer_closed;
  switch (errno_of(ec)) {
    case ECONNRESET:
    case EPIPE:
    case ECONNABORTED:
      return disconnect_reason::reset;
    case ETIMEDOUT:
      return disconnect_reason::timed_out;
    default:
      return disconnect_reason::error;
  }
}

connect_failure failure_of(std::error_code ec) {
  switch (errno_of(ec)) {
    case ECONNREFUSED:
      return connect_failure::refused;
    case ETIMEDOUT:
      return connect_failure::timed_out;
    case EHOSTUNREACH:
    case ENETUNREACH:
      return connect_failure::unreachable;
    default:
      return connect_failure::error;
  }
}

// Only a connection that failed loses what its peer had not acknowledged; one the gateway
// closes itself still delivers its send buffer after close().
bool failed(disconnect_reason r) {
  return r == disconnect_reason::peer_closed || r == disconnect_reason::reset ||
         r == disconnect_reason::timed_out || r == disconnect_reason::error;
}

}  // namespace

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

void consumer_link::start(const net::endpoint& at, std::optional<consumer_tls> tls,
                          std::weak_ptr<void> owner) {
  owner_ = std::move(owner);
  endpoint_ = at;
  tls_ = std::move(tls);
  stats_.tls.store(tls_.has_value(), std::memory_order_relaxed);
  if (state_ == state::idle) dial();
}

void consumer_link::dial() {
  std::error_code ec;
  const auto address = asio::ip::make_address(endpoint_.host, ec);
  if (ec) {
    // The loader accepts only literal addresses, so this is a bug upstream; keep retrying in
    // case a reload fixes the endpoint.
    if (++dial_failures_ == 1) {
      GW_LOG(error) << "consumer " << name_ << ": bad endpoint address '" << endpoint_.host
                    << "': " << ec.message();
      stats_.last_error.set("bad endpoint address '" + endpoint_.host + "': " + ec.message());
    }
    return wait_to_redial();
  }
  state_ = state::dialing;
  dialed_at_ = std::chrono::steady_clock::now();
  const std::uint64_t dial = ++dial_;
  step_timed_out_ = false;
  if (acks_) acks_->reset();
  close_socket();
  stream_.reset();  // a handshake or write still completing holds its own
  socket_.async_connect(
      asio::ip::tcp::endpoint(address, endpoint_.port),
      [this, keep = owner_.lock(), dial](std::error_code e) { on_dialed(e, dial); });
  if (limits_.connect_timeout.count() <= 0) return;
  // A host that drops SYNs would otherwise hold the dial for the kernel's minutes of retries.
  arm_deadline(limits_.connect_timeout, dial);
}

// The socket is closed under the dial's current step (connect or handshake) if it is still at
// that step when `after` has passed: the operation completes with operation_aborted, and
// step_timed_out_ tells its handler why.
void consumer_link::arm_deadline(std::chrono::milliseconds after, std::uint64_t dial) {
  redial_timer_.expires_after(after);
  redial_timer_.async_wait([this, keep = owner_.lock(), dial, step = state_](std::error_code ec) {
    if (ec || dial != dial_ || state_ != step) return;
    step_timed_out_ = true;
    close_socket();
  });
}

void consumer_link::on_dialed(std::error_code ec, std::uint64_t dial) {
  if (dial != dial_ || state_ != state::dialing) return;  // superseded
  redial_timer_.cancel();
  if (ec) return dial_failed(step_timed_out_ ? asio::error::timed_out : ec);
  std::error_code ignored;
  // Frames are written in whole batches already; Nagle would only delay the batch's tail.
  socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
  if (auto e = net::set_liveness(socket_.native_handle(), limits_.liveness)) {
    GW_LOG_LIMITED(warning, "consumer liveness options refused")
        << "consumer " << name_ << ": cannot bound how long a silent peer is kept: " << e.message();
  }
  if (tls_) return handshake(dial);
  come_up();
}

// A TLS consumer is up only once its handshake verified it; until then it is still a dial, and a
// failure counts as one (connect_failures, with a tls_ reason) and redials with the backoff.
void consumer_link::handshake(std::uint64_t dial) {
  state_ = state::handshaking;
  step_timed_out_ = false;
  std::error_code ec;
  stream_ = net::tls_channel::make(socket_, tls_->context->native_handle(),
                                   net::tls_channel::side::client, tls_->kernel_tls, ec);
  if (!stream_) return handshake_failed(connect_failure::tls_protocol, ec.message());
  if (auto why = net::prepare_tls_client(stream_->native_handle(), tls_->files.server_name);
      !why.empty()) {
    return handshake_failed(connect_failure::tls_protocol, why);
  }
  // The handler holds the stream: the next dial replaces stream_ while this one may still be
  // completing (aborted).
  stream_->async_handshake([this, keep = owner_.lock(), stream = stream_, dial](std::error_code e) {
    on_handshake(e, dial);
  });
  // A plaintext consumer never answers a ClientHello: without a deadline the dial would wait
  // for as long as the peer keeps the connection open.
  arm_deadline(handshake_bound(), dial);
}

void consumer_link::on_handshake(std::error_code ec, std::uint64_t dial) {
  if (dial != dial_ || state_ != state::handshaking) return;  // superseded
  redial_timer_.cancel();
  if (!ec) return settle(dial);
  SSL* ssl = stream_->native_handle();
  const auto failure =
      classify_tls_dial(ec, SSL_get_verify_result(ssl), step_timed_out_, tls_->files.server_name,
                        handshake_bound(), SSL_get0_peer_certificate(ssl) != nullptr);
  handshake_failed(failure.reason, failure.why);
}

void consumer_link::handshake_failed(connect_failure reason, const std::string& why) {
  close_socket();
  stats_.last_error.set("TLS with " + endpoint_.to_string() + ": " + why);
  stats_.connect_failures[static_cast<std::size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
  if (++dial_failures_ == 1) {
    GW_LOG_LIMITED_BY(warning, failure_log_)
        << "TLS handshake with consumer " << name_ << " at " << endpoint_.to_string() << " failed ("
        << to_string(reason) << "): " << why << "; retrying with backoff";
  } else {
    GW_LOG(debug) << "TLS handshake with consumer " << name_ << " failed again ("
                  << to_string(reason) << "): " << why;
  }
  wait_to_redial();
}

// The dial's own bound; without one (0) a handshake still gets 10 s: a peer that accepts and
// says nothing would otherwise hold the link for good.
std::chrono::milliseconds consumer_link::handshake_bound() const noexcept {
  return limits_.connect_timeout.count() > 0 ? limits_.connect_timeout
                                             : std::chrono::milliseconds{10000};
}

// Under TLS 1.3 the client's handshake ends before the server has checked the client's
// certificate: a consumer that wants one we do not have (or do not please) refuses with an
// alert a round trip later. Frames written meanwhile would be counted as sent and never read,
// on every redial. So the link waits that long with its read out, two handshake times (20 ms
// at least, the handshake's bound at most), before it lets the drain write: a refusal is a
// failed dial (tls_rejected) and costs no frame.
void consumer_link::settle(std::uint64_t dial) {
  if (SSL_version(stream_->native_handle()) != TLS1_3_VERSION) return come_up();
  using namespace std::chrono;
  const auto took = duration_cast<milliseconds>(steady_clock::now() - dialed_at_);
  state_ = state::settling;
  read_until_closed(conn_ + 1);
  redial_timer_.expires_after(
      std::clamp<milliseconds>(2 * took, milliseconds{20}, handshake_bound()));
  redial_timer_.async_wait([this, keep = owner_.lock(), dial](std::error_code ec) {
    if (!ec && dial == dial_ && state_ == state::settling) come_up(true);
  });
}

// The backoff is not reset here: a connection that fails at once (a consumer that accepts and
// sends garbage, or closes) is a failed dial as far as redialing goes. take_down() resets it
// for a connection that stayed up for limits_.healthy_after.
void consumer_link::come_up(bool read_pending) {
  dial_failures_ = 0;
  up_since_ = std::chrono::steady_clock::now();
  state_ = state::up;
  const std::uint64_t conn = ++conn_;
  stats_.connected.store(true, std::memory_order_relaxed);
  if (stream_) {
    const net::tls_records records = stream_->records();
    stats_.tls_records.store(static_cast<std::uint8_t>(1 + static_cast<unsigned>(records)),
                             std::memory_order_relaxed);
    GW_LOG_LIMITED(info, "consumer connections made")
        << "consumer " << name_ << " connected to " << endpoint_.to_string() << " ("
        << SSL_get_version(stream_->native_handle()) << ", records: " << net::to_string(records)
        << ")";
  } else {
    GW_LOG_LIMITED(info, "consumer connections made")
        << "consumer " << name_ << " connected to " << endpoint_.to_string();
  }
  if (!read_pending) read_until_closed(conn);
  events_.on_link_up(conn);
}

void consumer_link::dial_failed(std::error_code ec) {
  close_socket();
  stats_.last_error.set("cannot connect to " + endpoint_.to_string() + ": " + ec.message());
  stats_.connect_failures[static_cast<std::size_t>(failure_of(ec))].fetch_add(
      1, std::memory_order_relaxed);
  if (++dial_failures_ == 1) {
    GW_LOG_LIMITED_BY(warning, failure_log_)
        << "consumer " << name_ << " cannot connect to " << endpoint_.to_string() << ": "
        << ec.message() << "; retrying with backoff";
  } else {
    GW_LOG(debug) << "consumer " << name_ << " still cannot connect to " << endpoint_.to_string()
                  << ": " << ec.message();
  }
  wait_to_redial();
}

void consumer_link::wait_to_redial() {
  state_ = state::waiting;
  const auto delay = backoff_.next();
  GW_LOG(debug) << "consumer " << name_ << " redials in " << delay.count() << " ms";
  redial_timer_.expires_after(delay);
  redial_timer_.async_wait([this, keep = owner_.lock()](std::error_code ec) {
    // Cancelled: an endpoint change or the end.
    if (!ec && state_ == state::waiting) dial();
  });
}

// Consumers without `ack` send nothing; one small read stays pending only to notice the peer
// closing while the queue is idle (a write would notice too, but only once there is something
// to send). Those with it send their acks on the same read. On a TLS link the read goes through
// the stream (it also takes the records a TLS 1.3 server sends after the handshake, and the
// acks come out of the channel as on a plaintext one); it runs beside the drain's writes, both
// on the strand.
void consumer_link::read_until_closed(std::uint64_t conn) {
  auto on_read = [this, keep = owner_.lock(), stream = stream_, conn](std::error_code ec,
                                                                      std::size_t n) {
    if (unexplained_ && unexplained_->conn == conn) return explain(ec);
    if (settling(conn)) {
      if (!ec) {
        // Nothing was written yet: only its framing is kept, what it says is not judged.
        if (acks_) acks_->received(n, [](std::uint64_t) { return true; });
        return read_until_closed(conn);  // a consumer that talks: nothing to refuse
      }
      redial_timer_.cancel();
      // A close or a certificate alert is its verdict on our certificate; any other alert
      // (one that ends a renegotiation it asked for, say) is not.
      if (tls_alert_from_peer(ec) && !tls_certificate_alert(ec)) {
        return handshake_failed(
            connect_failure::tls_protocol,
            "it ended the connection right after the TLS handshake (" + ec.message() + ")");
      }
      return handshake_failed(connect_failure::tls_rejected,
                              "it closed the connection right after the TLS handshake (" +
                                  ec.message() + "; does it want a client certificate?)");
    }
    if (!up(conn)) return;
    // Once up, only an alert about our certificate is a refusal of the dial (a TLS 1.3 consumer
    // slower to judge it than the settle time); any other alert ends a connection that was up: a
    // disconnect, counted with the TLS errors.
    if (ec && stream && tls_certificate_alert(ec)) return refused_after_handshake(conn, ec);
    if (ec) return lost(conn, ec);
    if (acks_) return read_acks(conn, n);
    read_until_closed(conn);
  };
  const auto into = acks_ ? asio::buffer(acks_->free_space().data(), acks_->free_space().size())
                          : asio::buffer(discard_);
  if (stream_) return stream_->async_read_some(into, std::move(on_read));
  socket_.async_read_some(into, std::move(on_read));
}

// One apply per read: the reader checks every ack and passes on the highest of them.
void consumer_link::read_acks(std::uint64_t conn, std::size_t n) {
  ack_error refused = ack_error::none;
  const ack_error malformed = acks_->received(n, [&](std::uint64_t number) {
    refused = events_.on_ack(conn, number);
    return refused == ack_error::none;
  });
  if (!up(conn)) return;
  if (refused != ack_error::none) return protocol_error(conn, refused);
  if (malformed != ack_error::none) return protocol_error(conn, malformed);
  read_until_closed(conn);
}

// Closed and redialled as after any failure: what it had not acknowledged goes first to the
// next connection.
void consumer_link::protocol_error(std::uint64_t conn, ack_error why) {
  if (!up(conn)) return;
  stats_.protocol_errors[static_cast<std::size_t>(why)].fetch_add(1, std::memory_order_relaxed);
  stats_.last_error.set("sent something other than well-formed acks (" +
                        std::string{to_string(why)} + "); disconnected");
  GW_LOG_LIMITED_BY(warning, failure_log_)
      << "consumer " << name_ << " at " << endpoint_.to_string()
      << " sent something other than well-formed acks (" << to_string(why)
      << "); disconnecting, its unacknowledged frames go first to the next connection";
  drop(disconnect_reason::protocol_error);
  wait_to_redial();
}

// TLS 1.3: the consumer judged our certificate (or its absence) after our side of the handshake
// was done, and said no with an alert. A failed dial, not a lost connection (the alert ended a
// TLS connection: it counts as a TLS error too).
void consumer_link::refused_after_handshake(std::uint64_t conn, std::error_code ec) {
  if (!up(conn)) return;
  count_tls_error(ec);
  take_down();
  handshake_failed(connect_failure::tls_rejected, "it refused the TLS handshake (" + ec.message() +
                                                      "; does it want a client certificate?)");
}

void consumer_link::lost(std::uint64_t conn, std::error_code ec) {
  if (!up(conn)) return;  // already handled
  if (stream_ && ec != asio::error::eof) count_tls_error(ec);
  if (errno_of(ec) != EPIPE) {
    drop(reason_of(ec), ec);
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
  const auto told = reason_of(read_error);
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
  state_ = state::shut;
  ++dial_;
  redial_timer_.cancel();
}

void consumer_link::drop(disconnect_reason reason, std::error_code ec) {
  const std::uint64_t unacknowledged =
      failed(reason) ? net::unacknowledged_bytes(socket_.native_handle()) : 0;
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
  state_ = state::waiting;
  dial_failures_ = 0;
}

void consumer_link::account(disconnect_reason reason, std::error_code ec,
                            std::uint64_t unacknowledged) {
  stats_.disconnects[static_cast<std::size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
  if (unacknowledged)
    stats_.unacknowledged_bytes.fetch_add(unacknowledged, std::memory_order_relaxed);
  if (!failed(reason)) return;
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
