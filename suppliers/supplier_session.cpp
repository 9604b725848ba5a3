#include "suppliers/supplier_session.hpp"

#include <cassert>

#include "runtime/lf_pool.hpp"
#include "runtime/log.hpp"
#include "suppliers/frame_router.hpp"
#include "suppliers/session_registry.hpp"

namespace gatewayd::suppliers {

supplier_session::supplier_session(asio::ip::tcp::socket socket, session_context& ctx,
                                   std::optional<asio::ip::tcp::endpoint> peer)
    : socket_(std::move(socket)),
      idle_(socket_.get_executor(), *this, ctx.idle_timeout),
      pause_timer_(socket_.get_executor()),
      handshake_deadline_(socket_.get_executor()),
      tls_read_(socket_.get_executor(), *this, ctx.handshake_timeout),
      ctx_(ctx),
      stream_(ctx.max_payload, ctx.partial_budget, protocol::supplier_frames),
      state_(ctx.tls ? state::handshaking : state::reading) {
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
  idle_.start();
  do_wait();
}

void supplier_session::do_wait() {
  waiting_ = true;
  if (tls_read_.holds_records()) {
    // OpenSSL may hold whole records already taken off the socket: the kernel would not wake
    // us for them. Read again after the other ready handlers had their turn.
    asio::post(socket_.get_executor(),
               [self = shared_from_this()] { self->on_readable(std::error_code{}); });
    return;
  }
  // Wait for readability without a buffer: an idle connection holds no read memory. (TLS: or
  // for room to send what OpenSSL must send before it reads on.)
  const auto wait = tls_ ? tls_read_.begin_wait() : asio::ip::tcp::socket::wait_read;
  socket_.async_wait(wait,
                     [self = shared_from_this()](std::error_code ec) { self->on_readable(ec); });
}

void supplier_session::on_readable(std::error_code ec) {
  waiting_ = false;
  tls_read_.end_wait();
  if (in(state::closed)) return;
  if (ec) {
    if (ec != asio::error::operation_aborted) close(partial_discard::peer_closed);
    return;
  }
  if (paused()) return;  // paused, held, or confirming
  // Its own unconfirmed frames at the bound: no read that would number more.
  if (in(state::reading) && replies_ && replies_->full()) return wait_for_confirms();
  read_and_route();
}

void supplier_session::route_frames(frame_router& router, routed& r) {
  std::uint64_t frames = 0;
  std::uint64_t unroutable = 0;
  std::uint64_t denied = 0;
  std::string_view first_denied;  // valid while the chunk is: logged below, before any read
  router.supplier(identity_);
  const auto error =
      stream_.parse([&](const protocol::frame_view& f, const protocol::frame_slice& s) {
        ++frames;
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
  if (error) {
    r.error = error;
    r.end = pass_end::bad_frame;
  }
  if (frames) {
    r.frames += frames;
    ctx_.stats.frames_received.fetch_add(frames, std::memory_order_relaxed);
    stats_.frames.fetch_add(frames, std::memory_order_relaxed);
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
}

void supplier_session::flush(frame_router& router, bool busy, routed& r) {
  const std::shared_ptr<consumers::flow_control_listener> listener(
      shared_from_this(), static_cast<consumers::flow_control_listener*>(this));
  // A busy pass leaves the writes to an idle thread, if the pool has one, and reads on (the
  // session's next pass): reading and writing then run on two cores. Otherwise, and always at
  // low load, this thread writes (one hop, nobody woken).
  const bool write_here = !(busy && ctx_.idle_threads.any_waiting());
  const auto flushed = router.flush(listener, write_here);
  r.handed_off = flushed.handed_off;
  // A consumer's pause outranks how the reads ended, but not a close; a departing session
  // reads to its peer's end and never pauses again.
  const bool pausable =
      r.end == pass_end::drained || r.end == pass_end::budget || r.end == pass_end::confirms_full;
  if (flushed.pause && pausable && in(state::reading)) {
    r.end = flushed.paused_by_consumer ? pass_end::stalled_consumer : pass_end::consumer_paused;
  }
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
    read_pass(all);
    if (all.end == pass_end::peer_gone || all.end == pass_end::refused) {
      if (all.frames) idle_.progress();
      return all.end == pass_end::peer_gone ? closed_by_peer(all.read_error) : refuse_growth();
    }
    if (all.end != pass_end::budget || !all.handed_off || pass == max_passes) {
      return after_routing(all);
    }
  }
}

void supplier_session::read_pass(routed& all) {
  auto& router = ctx_.routers->begin_pass(ctx_.routes);
  std::size_t total = 0;
  std::size_t reads = 0;
  all.end = pass_end::budget;
  while (total < read_budget) {
    const auto buf = stream_.prepare();
    if (buf.size == 0) {
      all.end = pass_end::refused;
      break;
    }
    std::error_code ec;
    const std::size_t n = read_some(asio::buffer(buf.data, buf.size), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) {
      all.end = pass_end::drained;
      break;
    }
    if (ec) {
      all.end = pass_end::peer_gone;
      all.read_error = ec;
      break;
    }
    stream_.commit(n);
    total += n;
    ++reads;
    route_frames(router, all);
    if (all.end != pass_end::budget) break;  // bad_frame or unnumbered
    // The bound is checked between reads: one read's frames always find their numbers.
    if (replies_ && replies_->full()) {
      all.end = pass_end::confirms_full;
      break;
    }
    if (n < buf.size && !tls_) {  // a short read means the socket is drained (TLS: a record)
      all.end = pass_end::drained;
      break;
    }
    // A wide fan-out ends the pass early (its end stays `budget`: the next pass follows).
    if (router.slices() >= frame_router::pass_slices) break;
  }
  // Busy: more than one read, or one read that filled the pass's slices (as busy as a long pass:
  // its writes go to an idle thread while this one reads on).
  flush(router, reads > 1 || router.slices() >= frame_router::pass_slices, all);
  // What the pass settled itself (frames no consumer owes, frames this thread wrote) goes back
  // now: at most one control write per pass.
  if (replies_) flush_confirms();
  if (total) {
    ctx_.stats.bytes_received.fetch_add(total, std::memory_order_relaxed);
    stats_.bytes.fetch_add(total, std::memory_order_relaxed);
  }
}

void supplier_session::after_routing(const routed& r) {
  if (r.frames) idle_.progress();
  switch (r.end) {
    case pass_end::bad_frame:
      return fail_protocol(r.error);
    case pass_end::unnumbered:
      GW_LOG_LIMITED(error, "supplier confirm ledger overruns")
          << "supplier " << peer_
          << ": a CONFIRM frame found no room in its ledger; closing the connection";
      return close(not_a_frame);
    case pass_end::stalled_consumer:
    case pass_end::consumer_paused:
      ctx_.stats.backpressure_pauses.fetch_add(1, std::memory_order_relaxed);
      // Behind a stalled backpressure consumer it waits for as long as that consumer stalls:
      // the connection cap may reclaim it. Other pauses end in moments, or within
      // slow_consumer_ms.
      if (r.end == pass_end::stalled_consumer) set_paused_by_consumer(true);
      return pause(state::paused);
    default:
      break;
  }
  if (paused()) return;  // held by the gateway (drain) meanwhile
  stream_.release_if_idle();
  // The confirms flushed at the end of the pass may have made room already.
  if (r.end == pass_end::confirms_full && replies_->full()) {
    if (in(state::reading)) return wait_for_confirms();
    // Its peer left: nobody will read the confirms, and it resends what they would have
    // covered (reading on could only overrun the ledger).
    if (in(state::departing)) return closed_by_peer();
  }
  do_wait();
}

// The one place the state changes. Leaving a consumer's pause ends the wait the connection cap
// counts (set_paused_by_consumer); the timers and the socket are the business of the states'
// own handlers, which see the state they run in.
bool supplier_session::may_enter(state from, state to) noexcept {
  switch (from) {
    case state::handshaking:
      return to == state::reading || to == state::held || to == state::closed;
    case state::reading:
      return to == state::paused || to == state::confirming || to == state::held ||
             to == state::closed;
    case state::paused:
      return to == state::reading || to == state::confirming || to == state::departing ||
             to == state::held || to == state::closed;
    case state::departing:
      return to == state::held || to == state::closed;
    case state::confirming:
      return to == state::reading || to == state::held || to == state::closed;
    case state::held:
      return to == state::closed;
    case state::closed:
      return false;
  }
  return false;
}

void supplier_session::enter(state next) noexcept {
  // The table in supplier_session.hpp; anything else is a bug.
  assert(may_enter(state_.load(std::memory_order_relaxed), next));
  const state was = state_.exchange(next, std::memory_order_relaxed);
  count_in(was, -1);
  count_in(next, 1);
  if (was == state::paused && next != state::paused) set_paused_by_consumer(false);
  update_waiting();
}

}  // namespace gatewayd::suppliers
