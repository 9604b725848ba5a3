// The consumer's connection: dialing, redialing with backoff, noticing the peer leave,
// and moving to a new endpoint on reload.
#include "consumers/consumer.hpp"

#include "runtime/log.hpp"

namespace gatewayd::consumers {

// ---------------------------------------------------------------------------------------------
// Dialing and the link

void consumer::do_connect() {
  {
    std::lock_guard lock(mutex_);
    link_endpoint_ = endpoint_;
  }
  if (was_connected_) {
    stats_.reconnects.fetch_add(1, std::memory_order_relaxed);
    was_connected_ = false;
  }
  std::error_code ec;
  const auto address = asio::ip::make_address(link_endpoint_.host, ec);
  if (ec) {
    // The loader accepts only literal addresses, so this is a bug upstream; keep retrying in
    // case a reload fixes the endpoint.
    if (++dial_failures_ == 1) {
      GW_LOG(error) << "consumer " << name_ << ": bad endpoint address '" << link_endpoint_.host
                    << "': " << ec.message();
    }
    return schedule_redial();
  }
  state_ = link_state::connecting;
  const std::uint64_t dial = ++dial_id_;
  std::error_code ignored;
  socket_.close(ignored);
  socket_.async_connect(
      asio::ip::tcp::endpoint(address, link_endpoint_.port),
      asio::bind_executor(strand_, [self = shared_from_this(), dial](std::error_code e) {
        self->on_connect(e, dial);
      }));
}

void consumer::on_connect(std::error_code ec, std::uint64_t dial) {
  if (dial != dial_id_ || state_ != link_state::connecting) return;  // superseded
  if (ec) {
    std::error_code ignored;
    socket_.close(ignored);
    if (++dial_failures_ == 1) {
      GW_LOG(warning) << "consumer " << name_ << " cannot connect to " << link_endpoint_.to_string()
                      << ": " << ec.message() << "; retrying with backoff";
    } else {
      GW_LOG(debug) << "consumer " << name_ << " still cannot connect to "
                    << link_endpoint_.to_string() << ": " << ec.message();
    }
    return schedule_redial();
  }
  std::error_code ignored;
  // Frames are written in whole batches already; Nagle would only delay the batch's tail.
  socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
  dial_failures_ = 0;
  backoff_.reset();
  state_ = link_state::connected;
  bool start = false;
  std::uint64_t conn = 0;
  {
    std::lock_guard lock(mutex_);
    conn = ++conn_id_;
    // The mutex model lets other threads write only once the read below is started: both
    // touch the socket's state.
    connected_ = opts_.drain == drain_model::strand;
    // A write of the previous connection still on its way back (aborted) resumes the drain
    // itself in on_written.
    if (!writing_ && connected_) {
      writing_ = true;
      start = take_batch_locked();
    }
  }
  stats_.connected.store(true, std::memory_order_relaxed);
  GW_LOG(info) << "consumer " << name_ << " connected to " << link_endpoint_.to_string();
  do_read(conn);
  if (opts_.drain == drain_model::mutex) publish_connected_for_callers(conn);
  resume_collected();
  if (start) {
    write_batch();
  } else {
    check_drain();
  }
}

void consumer::schedule_redial() {
  if (finishing_) return;
  state_ = link_state::waiting;
  const auto delay = backoff_.next();
  GW_LOG(debug) << "consumer " << name_ << " redials in " << delay.count() << " ms";
  redial_timer_.expires_after(delay);
  redial_timer_.async_wait(asio::bind_executor(
      strand_, [self = shared_from_this()](std::error_code ec) { self->on_redial_timer(ec); }));
}

void consumer::on_redial_timer(std::error_code ec) {
  if (ec || state_ != link_state::waiting) return;  // cancelled: an endpoint change or close
  do_connect();
}

// Consumers send nothing; one small read stays pending only to notice the peer closing
// while the queue is idle (a write would notice too, but only once there is something to send).
void consumer::do_read(std::uint64_t conn) {
  socket_.async_read_some(asio::buffer(discard_),
                          asio::bind_executor(strand_, [self = shared_from_this(), conn](
                                                           std::error_code ec, std::size_t n) {
                            self->on_read(ec, n, conn);
                          }));
}

void consumer::on_read(std::error_code ec, std::size_t /*n*/, std::uint64_t conn) {
  if (conn != conn_id_ || state_ != link_state::connected) return;
  if (ec) return connection_lost(conn, ec);
  do_read(conn);
}

void consumer::connection_lost(std::uint64_t conn, std::error_code ec) {
  if (conn != conn_id_ || state_ != link_state::connected) return;  // already handled
  drop_link();
  GW_LOG(warning) << "consumer " << name_ << " lost its connection to "
                  << link_endpoint_.to_string() << ": " << ec.message() << "; redialing";
  schedule_redial();
}

void consumer::close_slow(std::uint64_t conn, std::uint64_t discarded) {
  if (conn != conn_id_ || state_ != link_state::connected) return;
  drop_link();
  GW_LOG(warning) << "consumer " << name_ << " at " << link_endpoint_.to_string()
                  << " is too slow: queue full, " << discarded
                  << " frames discarded; disconnecting";
  schedule_redial();
}

// Closing cancels the pending read and write; their handlers come back with
// operation_aborted, and on_written puts the unsent part of its batch back.
void consumer::drop_link() {
  {
    std::lock_guard lock(mutex_);
    connected_ = false;
  }
  close_link_socket();
  stats_.connected.store(false, std::memory_order_relaxed);
  was_connected_ = true;
  state_ = link_state::waiting;
  dial_failures_ = 0;
}

void consumer::reconfigure(const consumer_spec& spec) {
  bool moved = false;
  {
    std::lock_guard lock(mutex_);
    capacity_ = spec.queue_capacity;
    byte_cap_ = spec.queue_bytes;
    policy_ = spec.overflow;
    queue_.set_capacity_hint(capacity_);
    capacity_view_.store(capacity_, std::memory_order_relaxed);
    policy_view_.store(policy_, std::memory_order_relaxed);
    moved = !(spec.address == endpoint_);
    endpoint_ = spec.address;
    // From here on frames wait for the new endpoint; a batch already out may still go to
    // the old one.
    if (moved) connected_ = false;
  }
  // A larger capacity or a policy other than backpressure may release paused suppliers.
  asio::post(strand_, [self = shared_from_this(), moved] {
    if (moved) self->change_endpoint();
    {
      std::lock_guard lock(self->mutex_);
      self->collect_resumable_locked();
    }
    self->resume_collected();
  });
}

void consumer::change_endpoint() {
  if (state_ == link_state::idle || state_ == link_state::closed) return;
  redial_timer_.cancel();
  if (state_ == link_state::connected) {
    drop_link();
  } else {
    std::error_code ignored;
    socket_.close(ignored);
  }
  backoff_.reset();
  dial_failures_ = 0;
  do_connect();  // a new dial id: a connect still completing for the old address is ignored
  GW_LOG(info) << "consumer " << name_ << " endpoint changed; dialing "
               << link_endpoint_.to_string();
}

}  // namespace gatewayd::consumers
