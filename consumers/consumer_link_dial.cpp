// The link's way up: dial with a deadline, the TLS handshake and its vetting time, the
// connection up, and the redial after a failure, with backoff.
#include <algorithm>

#include "consumers/consumer_link.hpp"
#include "consumers/link_errors.hpp"
#include "consumers/tls_dial_failure.hpp"
#include "net/tcp_liveness.hpp"
#include "net/tls_context.hpp"
#include "runtime/log.hpp"
#include "runtime/log_limit.hpp"

namespace gatewayd::consumers {

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
  enter(state::dialing);
  dialed_at_ = std::chrono::steady_clock::now();
  const std::uint64_t dial = ++dial_;
  step_timed_out_ = false;
  if (acks_) acks_->reset();
  unsolicited_ = 0;
  close_socket();
  stream_.reset();  // a handshake or write still completing holds its own
  socket_.async_connect(
      asio::ip::tcp::endpoint(address, endpoint_.port),
      [self = events_.keep_alive(), this, dial](std::error_code e) { on_dialed(e, dial); });
  if (limits_.connect_timeout.count() <= 0) return;
  // A host that drops SYNs would otherwise hold the dial for the kernel's minutes of retries.
  arm_deadline(limits_.connect_timeout, dial);
}

// The socket is closed under the dial's current step (connect or handshake) if it is still at
// that step when `after` has passed: the operation completes with operation_aborted, and
// step_timed_out_ tells its handler why.
void consumer_link::arm_deadline(std::chrono::milliseconds after, std::uint64_t dial) {
  redial_timer_.expires_after(after);
  redial_timer_.async_wait(
      [self = events_.keep_alive(), this, dial, step = state_](std::error_code ec) {
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
  enter(state::handshaking);
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
  stream_->async_handshake([self = events_.keep_alive(), this, stream = stream_,
                            dial](std::error_code e) { on_handshake(e, dial); });
  // A plaintext consumer never answers a ClientHello: without a deadline the dial would wait
  // for as long as the peer keeps the connection open.
  arm_deadline(handshake_bound(), dial);
}

void consumer_link::on_handshake(std::error_code ec, std::uint64_t dial) {
  if (dial != dial_ || state_ != state::handshaking) return;  // superseded
  redial_timer_.cancel();
  if (!ec) return start_vetting(dial);
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
void consumer_link::start_vetting(std::uint64_t dial) {
  if (SSL_version(stream_->native_handle()) != TLS1_3_VERSION) return come_up();
  using namespace std::chrono;
  const auto took = duration_cast<milliseconds>(steady_clock::now() - dialed_at_);
  enter(state::vetting);
  read_until_closed(conn_ + 1);
  redial_timer_.expires_after(
      std::clamp<milliseconds>(2 * took, milliseconds{20}, handshake_bound()));
  redial_timer_.async_wait([self = events_.keep_alive(), this, dial](std::error_code ec) {
    if (!ec && dial == dial_ && state_ == state::vetting) come_up(true);
  });
}

// The backoff is not reset here: a connection that fails at once (a consumer that accepts and
// sends garbage, or closes) is a failed dial as far as redialing goes. take_down() resets it
// for a connection that stayed up for limits_.healthy_after.
void consumer_link::come_up(bool read_pending) {
  dial_failures_ = 0;
  up_since_ = std::chrono::steady_clock::now();
  enter(state::up);
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
  stats_.connect_failures[static_cast<std::size_t>(connect_failure_of(ec))].fetch_add(
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
  enter(state::backing_off);
  const auto delay = backoff_.next();
  GW_LOG(debug) << "consumer " << name_ << " redials in " << delay.count() << " ms";
  redial_timer_.expires_after(delay);
  redial_timer_.async_wait([self = events_.keep_alive(), this](std::error_code ec) {
    // Cancelled: an endpoint change or the end.
    if (!ec && state_ == state::backing_off) dial();
  });
}

}  // namespace gatewayd::consumers
