#include "suppliers/supplier_session.hpp"

#include <poll.h>

#include "runtime/lf_pool.hpp"
#include "runtime/log.hpp"
#include "suppliers/frame_router.hpp"
#include "suppliers/session_registry.hpp"

namespace gatewayd::suppliers {

supplier_session::supplier_session(asio::ip::tcp::socket socket, session_context& ctx,
                                   std::optional<asio::ip::tcp::endpoint> peer)
    : socket_(std::move(socket)),
      idle_timer_(socket_.get_executor()),
      pause_timer_(socket_.get_executor()),
      handshake_deadline_(socket_.get_executor()),
      send_deadline_(socket_.get_executor()),
      ctx_(ctx),
      stream_(ctx.max_payload, ctx.partial_budget, protocol::supplier_frames) {
  std::error_code ec;
  const auto ep = peer ? *peer : socket_.remote_endpoint(ec);
  const std::string host =
      ep.address().is_v6() ? '[' + ep.address().to_string() + ']' : ep.address().to_string();
  peer_ = ec ? std::string("unknown") : host + ":" + std::to_string(ep.port());
  if (!ec) peer_address_ = ep.address();
  // Reads happen only after the socket reported readable, and must never block the thread.
  socket_.non_blocking(true, ec);
  ctx_.stats.connections.fetch_add(1, std::memory_order_relaxed);
  count_in(state_.load(std::memory_order_relaxed), 1);
}

supplier_session::~supplier_session() {
  set_paused_by_consumer(false);  // the registry's count of paused sessions, if not closed
  end_handshake();
  if (const auto r = stats_.tls_records.load(std::memory_order_relaxed))
    ctx_.stats.tls_connections[r - 1].fetch_sub(1, std::memory_order_relaxed);
  ctx_.registry.remove(this);
  ctx_.stats.connections.fetch_sub(1, std::memory_order_relaxed);
  count_in(state_.load(std::memory_order_relaxed), -1);
}

void supplier_session::start() {
  // A TLS session takes its place under max_supplier_connections once its handshake is done.
  // Until then it holds only a slot among the handshakes, taken here, on the acceptor's strand,
  // so that they are evicted in the order they were accepted.
  ctx_.registry.add(shared_from_this(), ctx_.tls == nullptr);
  if (ctx_.tls) begin_handshake();
  asio::dispatch(socket_.get_executor(), [self = shared_from_this()] {
    if (self->ctx_.tls) return self->do_handshake();
    self->begin_reading();
  });
}

void supplier_session::begin_reading() {
  if (in(state::handshaking)) enter(state::reading);  // (a stop may have held it meanwhile)
  last_progress_ = std::chrono::steady_clock::now();
  if (ctx_.idle_timeout.count() > 0) arm_idle_timer(ctx_.idle_timeout);
  do_wait();
}

void supplier_session::stop() {
  asio::post(socket_.get_executor(),
             [self = shared_from_this()] { self->close(partial_discard::shutdown); });
}

void supplier_session::expel(close_reason why) {
  asio::post(socket_.get_executor(), [self = shared_from_this(), why] {
    if (self->in(state::closed)) return;
    self->ctx_.stats.closed[static_cast<std::size_t>(why)].fetch_add(1, std::memory_order_relaxed);
    GW_LOG_LIMITED(warning, "supplier connections expelled")
        << "supplier " << self->peer_ << ": closing the connection (" << to_string(why)
        << "): the reloaded allow list no longer admits it";
    self->close(partial_discard::not_allowed);
  });
}

void supplier_session::reclaim() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    if (self->in(state::closed)) return;  // gone meanwhile: its place is free all the same
    self->ctx_.stats.closed[static_cast<std::size_t>(close_reason::reclaimed)].fetch_add(
        1, std::memory_order_relaxed);
    const auto since = self->paused_by_consumer_since();
    GW_LOG_LIMITED(warning, "supplier connections reclaimed")
        << "supplier " << self->peer_ << ": closing the connection (reclaimed): "
        << (since ? "paused behind a full consumer for " +
                        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::steady_clock::now() - *since)
                                           .count()) +
                        " ms, the longest"
                  : std::string("the session paused longest"))
        << "; its place at max_supplier_connections goes to a new connection";
    self->close(partial_discard::reclaimed);
  });
}

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

void supplier_session::ask_to_leave() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    if (self->in(state::closed)) return;
    // TLS: close_notify before the FIN, or the supplier sees a cut stream, not a goodbye.
    if (self->tls_) self->tls_->close_notify();
    std::error_code ignored;
    self->socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
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

void supplier_session::held_by_stalled_consumer() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    // Still paused, and by a consumer (not the gateway's stop, not reading to its peer's end).
    // A pause already counted keeps its start.
    if (!self->in(state::paused)) return;
    if (!self->paused_by_consumer_since()) self->set_paused_by_consumer(true);
  });
}

void supplier_session::do_wait() {
  waiting_ = true;
  if (!tls_drained_) {
    // OpenSSL may hold whole records already taken off the socket: the kernel would not wake
    // us for them. Read again after the other ready handlers had their turn.
    asio::post(socket_.get_executor(),
               [self = shared_from_this()] { self->on_readable(std::error_code{}); });
    return;
  }
  // Wait for readability without a buffer: an idle connection holds no read memory. (TLS: or
  // for room to send what OpenSSL must send before it reads on.)
  const auto wait = tls_ ? tls_read_wait_ : asio::ip::tcp::socket::wait_read;
  if (wait == asio::ip::tcp::socket::wait_write) arm_send_deadline();
  socket_.async_wait(wait,
                     [self = shared_from_this()](std::error_code ec) { self->on_readable(ec); });
}

void supplier_session::on_readable(std::error_code ec) {
  waiting_ = false;
  send_deadline_.cancel();
  if (in(state::closed)) return;
  if (ec) {
    if (ec != asio::error::operation_aborted) close(partial_discard::peer_closed);
    return;
  }
  if (paused()) return;  // paused, held, or confirming
  // The ledgers' bound may have been reached by other connections meanwhile: no read that
  // would number more (the bound is passed by at most the reads in progress).
  if (in(state::reading) && replies_ && replies_->full()) return wait_for_confirms();
  read_and_route();
}

supplier_session::routed supplier_session::route_frames(frame_router& router) {
  std::uint64_t unroutable = 0;
  std::uint64_t denied = 0;
  std::string_view first_denied;  // valid while the chunk is: logged below, before any read
  routed r;
  router.supplier(identity_);
  r.error = stream_.parse([&](const protocol::frame_view& f, const protocol::frame_slice& s) {
    ++r.frames;
    const auto outcome = f.flags == protocol::frame_flags::confirm
                             ? route_confirmed(router, f, s, r)
                             : router.route(f.address, s);
    switch (outcome) {
      case frame_router::outcome::routed:
        break;
      case frame_router::outcome::unroutable:
        ++unroutable;
        break;
      case frame_router::outcome::not_permitted:
        if (!denied++) first_denied = f.address;
        break;
    }
  });
  router.hold();
  if (r.frames) {
    ctx_.stats.frames_received.fetch_add(r.frames, std::memory_order_relaxed);
    stats_.frames.fetch_add(r.frames, std::memory_order_relaxed);
  }
  if (unroutable) ctx_.stats.unroutable.fetch_add(unroutable, std::memory_order_relaxed);
  if (denied) {
    router.count_not_permitted(denied);
    // The connection stays (as nats-server does): the frames are dropped, counted and logged.
    GW_LOG_LIMITED(warning, "supplier frames not permitted")
        << "supplier " << peer_ << " (identity \"" << log::escaped(identity_) << "\"): " << denied
        << " frame(s) to addresses it may not publish to, the first " << first_denied
        << "; dropped (not_permitted)";
  }
  return r;
}

void supplier_session::flush(frame_router& router, bool busy, routed& r) {
  const std::shared_ptr<consumers::flow_control_listener> listener(
      shared_from_this(), static_cast<consumers::flow_control_listener*>(this));
  // A busy pass leaves the writes to an idle thread, if the pool has one, and reads on (the
  // session's next pass): reading and writing then run on two cores. Otherwise, and always at
  // low load, this thread writes (one hop, nobody woken).
  const bool write_here = !(busy && ctx_.idle_threads.any_waiting());
  const auto flushed = router.flush(listener, write_here);
  r.pause = r.pause || flushed.pause;
  r.paused_by_consumer = r.paused_by_consumer || flushed.paused_by_consumer;
  r.handed_off = flushed.handed_off;
}

// The thread that saw the event reads and routes until the
// socket is drained or the budget is spent, then hands each consumer one batch for the whole
// pass. Under load a pass spans several reads, so the consumers' writes carry many frames
// each (fewer syscalls and receiver wake-ups per frame); at low load it is one read, handed
// over at once and written by this thread (one hop). A pass that left its writes to an idle
// thread is followed by the next pass at once: this thread reads while that one writes.
// Frames that arrived whole before a protocol error are still routed.
void supplier_session::read_and_route() {
  routed all;
  for (std::size_t pass = 1;; ++pass) {
    const pass_end end = read_pass(all);
    if ((end == pass_end::peer_gone || end == pass_end::refused) && !all.error) {
      if (all.frames) last_progress_ = std::chrono::steady_clock::now();
      return end == pass_end::peer_gone ? closed_by_peer(all.read_error) : refuse_growth();
    }
    if (end != pass_end::budget || !all.handed_off || all.pause || all.error ||
        pass == max_passes) {
      return after_routing(all);
    }
  }
}

supplier_session::pass_end supplier_session::read_pass(routed& all) {
  auto& router = ctx_.routers->begin_pass(ctx_.routes);
  std::size_t total = 0;
  std::size_t reads = 0;
  pass_end end = pass_end::budget;
  while (total < read_budget) {
    const auto buf = stream_.prepare();
    if (buf.size == 0) {
      end = pass_end::refused;
      break;
    }
    std::error_code ec;
    const std::size_t n = read_some(asio::buffer(buf.data, buf.size), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) {
      end = pass_end::drained;
      break;
    }
    if (ec) {
      end = pass_end::peer_gone;
      all.read_error = ec;
      break;
    }
    stream_.commit(n);
    total += n;
    ++reads;
    const routed r = route_frames(router);
    all.frames += r.frames;
    all.error = r.error;
    all.unnumbered = all.unnumbered || r.unnumbered;
    if (r.error || r.unnumbered) break;
    // The bound is checked between reads: one read's frames always find their numbers.
    if (replies_ && replies_->full()) {
      all.confirms_full = true;
      end = pass_end::confirms_full;
      break;
    }
    if (n < buf.size && !tls_) {  // a short read means the socket is drained (TLS: a record)
      end = pass_end::drained;
      break;
    }
  }
  flush(router, reads > 1, all);
  // What the pass settled itself (frames no consumer owes, frames this thread wrote) goes back
  // now: at most one control write per pass.
  if (replies_) flush_confirms();
  if (total) {
    ctx_.stats.bytes_received.fetch_add(total, std::memory_order_relaxed);
    stats_.bytes.fetch_add(total, std::memory_order_relaxed);
  }
  return end;
}

void supplier_session::after_routing(const routed& r) {
  if (r.frames) last_progress_ = std::chrono::steady_clock::now();
  if (r.error) return fail_protocol(r.error);
  if (r.unnumbered) {
    GW_LOG_LIMITED(error, "supplier confirm ledger overruns")
        << "supplier " << peer_
        << ": a CONFIRM frame found no room in its ledger; closing the connection";
    return close(not_a_frame);
  }
  if (r.pause && in(state::reading)) {
    ctx_.stats.backpressure_pauses.fetch_add(1, std::memory_order_relaxed);
    // Behind a stalled backpressure consumer it waits for as long as that consumer stalls: the
    // connection cap may reclaim it. Other pauses end in moments, or within slow_consumer_ms.
    if (r.paused_by_consumer) set_paused_by_consumer(true);
    return pause(state::paused);
  }
  if (paused()) return;  // held by the gateway (drain) meanwhile
  stream_.release_if_idle();
  // The confirms flushed at the end of the pass may have made room already.
  if (r.confirms_full && replies_->full()) {
    if (in(state::reading)) return wait_for_confirms();
    // Its peer left: nobody will read the confirms, and it resends what they would have
    // covered (reading on could only overrun the ledger).
    if (in(state::departing)) return closed_by_peer();
  }
  do_wait();
}

void supplier_session::closed_by_peer(const std::error_code& ec) {
  if (tls_ && ec && ec != asio::error::eof) return fail_tls(ec);
  if (stream_.has_partial()) {
    GW_LOG_LIMITED(info, "supplier connections closed mid-frame")
        << "supplier " << peer_ << " closed mid-frame at offset " << stream_.offset() << " ("
        << stream_.buffered() << " bytes of a partial frame discarded)";
  }
  close(partial_discard::peer_closed);
}

// Every connection may hold a standard chunk; what a larger frame needs beyond it while it
// arrives comes from max_partial_frame_bytes, shared by all. Waiting for that budget could
// deadlock (every holder waiting for more) while holding memory, so the connection that
// cannot grow is closed at once, like the other limits a peer can hit, and counted.
void supplier_session::refuse_growth() {
  ctx_.stats.closed[static_cast<std::size_t>(close_reason::partial_frame_budget)].fetch_add(
      1, std::memory_order_relaxed);
  GW_LOG_LIMITED(warning, "supplier frames over the partial-frame budget")
      << "supplier " << peer_ << ": a frame of " << stream_.pending_frame_size()
      << " bytes at byte offset " << stream_.offset() << " cannot be received ("
      << stream_.buffered()
      << " bytes in): max_partial_frame_bytes is in use by frames still arriving; closing "
         "(partial_frame_budget)";
  close(partial_discard::partial_frame_budget);
}

void supplier_session::fail_protocol(const protocol::frame_stream::stream_error& e) {
  ctx_.stats.protocol_errors[static_cast<std::size_t>(e.reason)].fetch_add(
      1, std::memory_order_relaxed);
  GW_LOG_LIMITED(warning, "supplier protocol errors")
      << "supplier " << peer_ << ": protocol error " << to_string(e.reason) << " at byte offset "
      << e.offset << "; closing the connection";
  close(not_a_frame);
}

void supplier_session::close(std::optional<partial_discard> partial) {
  if (in(state::closed)) return;
  enter(state::closed);
  std::error_code ignored;
  idle_timer_.cancel();
  pause_timer_.cancel();
  handshake_deadline_.cancel();
  send_deadline_.cancel();
  end_handshake();
  if (replies_) replies_->deadline.cancel();
  replies_.reset();                // what consumers still owe settles into a ledger nobody reads
  if (tls_) tls_->close_notify();  // the supplier sees our close, not a cut
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  if (partial) count_partial(*partial);
  stream_.release_if_idle();
}

// Whole frames were routed as they arrived; only a frame still arriving is lost with the
// connection, and it is counted, frames and bytes, by why the connection ended.
void supplier_session::count_partial(partial_discard why) noexcept {
  if (!stream_.has_partial()) return;
  const auto i = static_cast<std::size_t>(why);
  ctx_.stats.partial_frames_discarded[i].fetch_add(1, std::memory_order_relaxed);
  ctx_.stats.partial_bytes_discarded[i].fetch_add(stream_.buffered(), std::memory_order_relaxed);
}

void supplier_session::set_paused_by_consumer(bool on) noexcept {
  const auto before = paused_by_consumer_at_.exchange(
      on ? std::chrono::steady_clock::now().time_since_epoch().count() : not_paused,
      std::memory_order_relaxed);
  if ((before != not_paused) != on) ctx_.registry.count_paused(on);
}

// The one place the state changes. Leaving a consumer's pause ends the wait the connection cap
// counts (set_paused_by_consumer); the timers and the socket are the business of the states'
// own handlers, which see the state they run in.
void supplier_session::enter(state next) noexcept {
  const state was = state_.exchange(next, std::memory_order_relaxed);
  count_in(was, -1);
  count_in(next, 1);
  if (was == state::paused && next != state::paused) set_paused_by_consumer(false);
  update_waiting();
}

void supplier_session::update_waiting() noexcept {
  const bool waits = !in(state::closed) && (paused() || awaiting_confirms());
  const bool waited = waiting_at_.load(std::memory_order_relaxed) != not_paused;
  if (waits == waited) return;
  const auto now = std::chrono::steady_clock::now();
  waiting_at_.store(waits ? now.time_since_epoch().count() : not_paused, std::memory_order_relaxed);
  if (!waits) last_progress_ = now;
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
  if (replies_->over_ledger_budget()) {
    GW_LOG_LIMITED(warning, "supplier reads held by max_confirm_ledger_bytes")
        << "supplier " << peer_ << ": confirm ledgers hold " << ctx_.stats.confirm_ledger.used()
        << " bytes (max_confirm_ledger_bytes " << ctx_.stats.confirm_ledger.limit()
        << "); not reading it until frames owed settle (confirming)";
  }
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
  pollfd p{socket_.native_handle(), POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

void supplier_session::arm_pause_check() {
  pause_timer_.expires_after(pause_check);
  pause_timer_.async_wait(
      [self = shared_from_this()](std::error_code ec) { self->on_pause_check(ec); });
}

void supplier_session::on_pause_check(std::error_code ec) {
  if (ec || !paused()) return;  // resumed, departed or closed
  if (peer_left()) return depart();
  // Held by the ledgers' bound, which other connections' frames free: asked again here.
  if (in(state::confirming) && !replies_->full()) {
    enter(state::reading);
    if (!waiting_) do_wait();
    return;
  }
  arm_pause_check();
}

void supplier_session::arm_idle_timer(std::chrono::steady_clock::duration after) {
  idle_timer_.expires_after(after);
  idle_timer_.async_wait(
      [self = shared_from_this()](std::error_code ec) { self->on_idle_timer(ec); });
}

void supplier_session::on_idle_timer(std::error_code ec) {
  if (ec || in(state::closed)) return;
  // A session that waits, paused or for confirms, is not idle: closing it would only make its
  // supplier resend what the gateway holds already. A peer that is gone is TCP liveness's to
  // find, and a full connection cap reclaims the session paused longest.
  if (waiting_since()) return arm_idle_timer(ctx_.idle_timeout);
  // The timer is re-armed for the remainder instead of reset on every read: reads stay cheap.
  const auto idle = std::chrono::steady_clock::now() - last_progress_;
  if (idle < ctx_.idle_timeout) return arm_idle_timer(ctx_.idle_timeout - idle);
  ctx_.stats.closed[static_cast<std::size_t>(close_reason::idle_timeout)].fetch_add(
      1, std::memory_order_relaxed);
  GW_LOG_LIMITED(info, "supplier idle timeouts")
      << "supplier " << peer_ << ": no whole frame for "
      << std::chrono::duration_cast<std::chrono::milliseconds>(idle).count()
      << " ms; closing (idle timeout)";
  close(partial_discard::idle_timeout);
}

}  // namespace gatewayd::suppliers
