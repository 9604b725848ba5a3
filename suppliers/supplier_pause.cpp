// A supplier session that does not read: paused by a consumer, held by the gateway's stop, or
// waiting for confirms to make room; how it watches meanwhile for its peer to leave, and how
// each wait ends.
#include "net/tcp_liveness.hpp"
#include "runtime/log.hpp"
#include "suppliers/session_registry.hpp"
#include "suppliers/supplier_session.hpp"

namespace gatewayd::suppliers {

void supplier_session::pause_reading() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    // The gateway's own stop holds it now: not reclaimable (enter() ends a consumer's pause).
    if (self->in(state::closed) || self->in(state::held)) return;
    self->pause(state::held);
  });
}

void supplier_session::stop_reading() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    if (self->in(state::closed)) return;
    if (!self->replies_ || self->replies_->settled()) return self->close(partial_discard::shutdown);
    if (!self->in(state::held)) self->pause(state::held);
  });
}

void supplier_session::resume_reading() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    if (!self->in(state::paused)) return;  // only a consumer's pause ends so
    // Its unconfirmed frames may have reached the bound meanwhile: then it waits for those.
    if (self->replies_ && self->replies_->full()) return self->wait_for_confirms();
    self->enter(state::reading);
    if (!self->waiting_) self->do_wait();
  });
}

void supplier_session::paused_by_stalled_consumer() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    // Still paused, and by a consumer (not the gateway's stop, not reading to its peer's end).
    // A pause already counted keeps its start.
    if (!self->in(state::paused)) return;
    if (!self->paused_by_consumer_since()) self->set_paused_by_consumer(true);
  });
}

void supplier_session::set_paused_by_consumer(bool on) noexcept {
  const auto before = paused_by_consumer_at_.exchange(
      on ? std::chrono::steady_clock::now().time_since_epoch().count() : not_paused,
      std::memory_order_relaxed);
  if ((before != not_paused) != on) ctx_.registry.count_paused(on);
}

// A paused session waits on nothing: its peer may leave meanwhile, and nobody would notice
// until a consumer resumed it. The kernel knows at once (POLLRDHUP) even with data unread, so
// the session asks it now, and its pause timer asks again every pause_check while paused.
void supplier_session::pause(state why) {
  enter(why);
  if (peer_left()) return depart();
  arm_pause_check();
}

void supplier_session::wait_for_confirms() {
  pause(state::confirming);
}

// The peer closed while we were not reading. What it sent before its FIN is in our receive
// buffer, a finite amount: it is read and routed as usual (the consumers' policies apply; a
// backpressure consumer queues it past its limit, by at most that much), then EOF closes the
// session. A session held by a stop reads nothing more: it just closes.
void supplier_session::depart() {
  // Waiting for confirms nobody will read: what it sent unconfirmed it resends elsewhere.
  if (in(state::held) || in(state::confirming)) return closed_by_peer();
  enter(state::departing);
  if (!waiting_) do_wait();
}

bool supplier_session::peer_left() {
  return net::peer_has_left(socket_.native_handle());
}

void supplier_session::arm_pause_check() {
  pause_timer_.expires_after(pause_check);
  pause_timer_.async_wait(
      [self = shared_from_this()](std::error_code ec) { self->on_pause_check(ec); });
}

void supplier_session::on_pause_check(std::error_code ec) {
  if (ec || !paused()) return;  // resumed, departed or closed
  if (peer_left()) return depart();
  // Confirms that made room are flushed on the session's strand; asked again here all the same.
  if (in(state::confirming) && !replies_->full()) {
    enter(state::reading);
    if (!waiting_) do_wait();
    return;
  }
  arm_pause_check();
}

}  // namespace gatewayd::suppliers
