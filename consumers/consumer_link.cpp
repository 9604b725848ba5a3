#include "consumers/consumer_link.hpp"

#include "runtime/log.hpp"
#include "runtime/log_limit.hpp"

namespace gatewayd::consumers {

consumer_link::consumer_link(const runtime::strand& strand, const std::string& name,
                             consumer_stats& stats, backoff redial, link_events& events)
    : name_(name),
      stats_(stats),
      events_(events),
      socket_(strand),
      redial_timer_(strand),
      backoff_(std::move(redial)) {}

void consumer_link::start(const net::endpoint& at, std::weak_ptr<void> owner) {
  owner_ = std::move(owner);
  endpoint_ = at;
  if (state_ == state::idle) dial();
}

void consumer_link::dial() {
  if (was_up_) {
    stats_.reconnects.fetch_add(1, std::memory_order_relaxed);
    was_up_ = false;
  }
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
  const std::uint64_t dial = ++dial_;
  close_socket();
  socket_.async_connect(
      asio::ip::tcp::endpoint(address, endpoint_.port),
      [this, keep = owner_.lock(), dial](std::error_code e) { on_dialed(e, dial); });
}

void consumer_link::on_dialed(std::error_code ec, std::uint64_t dial) {
  if (dial != dial_ || state_ != state::dialing) return;  // superseded
  if (ec) {
    close_socket();
    stats_.last_error.set("cannot connect to " + endpoint_.to_string() + ": " + ec.message());
    if (++dial_failures_ == 1) {
      GW_LOG_LIMITED(warning, "consumer dials failed")
          << "consumer " << name_ << " cannot connect to " << endpoint_.to_string() << ": "
          << ec.message() << "; retrying with backoff";
    } else {
      GW_LOG(debug) << "consumer " << name_ << " still cannot connect to " << endpoint_.to_string()
                    << ": " << ec.message();
    }
    return wait_to_redial();
  }
  std::error_code ignored;
  // Frames are written in whole batches already; Nagle would only delay the batch's tail.
  socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
  dial_failures_ = 0;
  backoff_.reset();
  state_ = state::up;
  const std::uint64_t conn = ++conn_;
  stats_.connected.store(true, std::memory_order_relaxed);
  GW_LOG_LIMITED(info, "consumer connections made")
      << "consumer " << name_ << " connected to " << endpoint_.to_string();
  read_until_closed(conn);
  events_.on_link_up(conn);
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

// Consumers send nothing; one small read stays pending only to notice the peer closing while
// the queue is idle (a write would notice too, but only once there is something to send).
void consumer_link::read_until_closed(std::uint64_t conn) {
  socket_.async_read_some(asio::buffer(discard_),
                          [this, keep = owner_.lock(), conn](std::error_code ec, std::size_t) {
                            if (!up(conn)) return;
                            if (ec) return lost(conn, ec);
                            read_until_closed(conn);
                          });
}

void consumer_link::lost(std::uint64_t conn, std::error_code ec) {
  if (!up(conn)) return;  // already handled
  drop("lost its connection to", ec);
  wait_to_redial();
}

void consumer_link::drop_slow(std::uint64_t conn, std::uint64_t discarded) {
  if (!up(conn)) return;
  GW_LOG_LIMITED(warning, "slow consumers disconnected")
      << "consumer " << name_ << " at " << endpoint_.to_string() << " is too slow: queue full, "
      << discarded << " frames discarded; disconnecting";
  stats_.last_error.set("too slow: queue full, " + std::to_string(discarded) +
                        " frames discarded; disconnected");
  drop(nullptr, {});
  wait_to_redial();
}

void consumer_link::move_to(const net::endpoint& at) {
  endpoint_ = at;
  if (state_ == state::idle || state_ == state::shut) return;
  redial_timer_.cancel();
  if (state_ == state::up) drop(nullptr, {});
  backoff_.reset();
  dial_failures_ = 0;
  dial();  // a new dial id: a connect still completing for the old address is ignored
  GW_LOG(info) << "consumer " << name_ << " endpoint changed; dialing " << endpoint_.to_string();
}

void consumer_link::shut() {
  if (state_ == state::up) {
    drop(nullptr, {});
  } else {
    close_socket();
  }
  state_ = state::shut;
  ++dial_;
  redial_timer_.cancel();
}

// Closing cancels the pending read and any write; their handlers come back with
// operation_aborted, and the drain puts the unsent part of its batch back.
void consumer_link::drop(const char* why, std::error_code ec) {
  events_.on_link_down();
  close_socket();
  stats_.connected.store(false, std::memory_order_relaxed);
  if (why) {
    GW_LOG_LIMITED(warning, "consumer connections lost")
        << "consumer " << name_ << " " << why << " " << endpoint_.to_string() << ": "
        << ec.message() << "; redialing";
    stats_.last_error.set(std::string{why} + ' ' + endpoint_.to_string() + ": " + ec.message());
  }
  was_up_ = true;
  state_ = state::waiting;
  dial_failures_ = 0;
}

void consumer_link::close_socket() {
  std::error_code ignored;
  socket_.close(ignored);
}

}  // namespace gatewayd::consumers
