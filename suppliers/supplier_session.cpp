#include "suppliers/supplier_session.hpp"

#include "gateway/lf_pool.hpp"
#include "gateway/log.hpp"
#include "suppliers/frame_router.hpp"
#include "suppliers/session_registry.hpp"

namespace gatewayd::suppliers {

using gateway::lf_pool;

std::string_view to_string(close_reason r) noexcept {
  switch (r) {
    case close_reason::connection_limit:
      return "connection_limit";
    case close_reason::not_allowed:
      return "not_allowed";
    case close_reason::idle_timeout:
      return "idle_timeout";
  }
  return "unknown";
}

supplier_session::supplier_session(asio::ip::tcp::socket socket, session_context& ctx)
    : socket_(std::move(socket)),
      idle_timer_(socket_.get_executor()),
      ctx_(ctx),
      stream_(ctx.max_payload) {
  std::error_code ec;
  const auto ep = socket_.remote_endpoint(ec);
  peer_ = ec ? std::string("unknown") : ep.address().to_string() + ":" + std::to_string(ep.port());
  // Reads happen only after the socket reported readable, and must never block the thread.
  socket_.non_blocking(true, ec);
  ctx_.stats.connections.fetch_add(1, std::memory_order_relaxed);
}

supplier_session::~supplier_session() {
  ctx_.registry.remove(this);
  ctx_.stats.connections.fetch_sub(1, std::memory_order_relaxed);
}

void supplier_session::start() {
  ctx_.registry.add(shared_from_this());
  asio::dispatch(socket_.get_executor(), [self = shared_from_this()] {
    lf_pool::promote_new_leader();
    self->last_progress_ = std::chrono::steady_clock::now();
    if (self->ctx_.idle_timeout.count() > 0) self->arm_idle_timer(self->ctx_.idle_timeout);
    self->do_wait();
  });
}

void supplier_session::stop() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    lf_pool::promote_new_leader();
    self->close();
  });
}

void supplier_session::pause_reading() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    lf_pool::promote_new_leader();
    self->held_ = true;
    self->paused_ = true;
  });
}

void supplier_session::resume_reading() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    lf_pool::promote_new_leader();
    if (self->closed_ || self->held_) return;
    // Half-Sync/Half-Async: the worker may have asked for the pause (flush) but its completion,
    // which sets paused_, has not run yet; remember the resume for it.
    if (self->handed_off_) {
      self->resumed_while_handed_off_ = true;
      return;
    }
    if (!self->paused_) return;
    self->paused_ = false;
    if (!self->waiting_) self->do_wait();
  });
}

void supplier_session::do_wait() {
  waiting_ = true;
  // Wait for readability without a buffer: an idle connection holds no read memory.
  socket_.async_wait(asio::ip::tcp::socket::wait_read,
                     [self = shared_from_this()](std::error_code ec) { self->on_readable(ec); });
}

void supplier_session::on_readable(std::error_code ec) {
  lf_pool::promote_new_leader();
  waiting_ = false;
  if (closed_) return;
  if (ec) {
    if (ec != asio::error::operation_aborted) close();
    return;
  }
  if (paused_) return;
  if (ctx_.handoff) return read_for_handoff();
  read_and_route();
}

void supplier_session::read_and_route() {
  auto& router = frame_router::for_this_thread(ctx_.routes);
  const std::shared_ptr<consumers::flow_control_listener> listener(
      shared_from_this(), static_cast<consumers::flow_control_listener*>(this));
  std::size_t total = 0;
  std::uint64_t frames = 0;
  std::uint64_t unroutable = 0;
  bool peer_gone = false;
  bool pause = false;
  frame_stream::stream_error bad;
  auto on_frame = [&](const frame_view& f, const frame_slice& s) {
    ++frames;
    if (!router.route(f.address, s)) ++unroutable;
  };
  while (total < read_budget) {
    const auto buf = stream_.prepare();
    std::error_code ec;
    const std::size_t n = socket_.read_some(asio::buffer(buf.data, buf.size), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) break;
    if (ec) {
      peer_gone = true;
      break;
    }
    stream_.commit(n);
    total += n;
    bad = stream_.parse(on_frame);
    // Frames that arrived whole before a protocol error are still routed.
    if (router.flush(listener).pause) pause = true;
    if (bad || pause || n < buf.size) break;  // a short read means the socket is drained
  }
  auto& stats = ctx_.stats;
  if (frames) {
    stats.frames_received.fetch_add(frames, std::memory_order_relaxed);
    last_progress_ = std::chrono::steady_clock::now();
  }
  if (total) stats.bytes_received.fetch_add(total, std::memory_order_relaxed);
  if (unroutable) stats.unroutable.fetch_add(unroutable, std::memory_order_relaxed);

  if (bad) return fail_protocol(bad);
  if (peer_gone) {
    if (stream_.has_partial()) {
      GW_LOG(info) << "supplier " << peer_ << " closed mid-frame at offset " << stream_.offset()
                   << " (" << stream_.buffered() << " bytes of a partial frame discarded)";
    }
    return close();
  }
  if (pause) {
    paused_ = true;
    stats.backpressure_pauses.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  stream_.release_if_idle();
  do_wait();
}

// Half-Sync/Half-Async, on the I/O thread: one read, then the chunk goes to a worker. The
// session stays unarmed until the worker is done, so its frames keep their order.
void supplier_session::read_for_handoff() {
  const auto buf = stream_.prepare();
  std::error_code ec;
  const std::size_t n = socket_.read_some(asio::buffer(buf.data, buf.size), ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) return do_wait();
  if (ec) {
    if (stream_.has_partial()) {
      GW_LOG(info) << "supplier " << peer_ << " closed mid-frame at offset " << stream_.offset()
                   << " (" << stream_.buffered() << " bytes of a partial frame discarded)";
    }
    return close();
  }
  stream_.commit(n);
  ctx_.stats.bytes_received.fetch_add(n, std::memory_order_relaxed);
  handed_off_ = true;
  ctx_.handoff->submit(shared_from_this());
}

void supplier_session::process_handoff() {
  auto& router = frame_router::for_this_thread(ctx_.routes);
  const std::shared_ptr<consumers::flow_control_listener> listener(
      shared_from_this(), static_cast<consumers::flow_control_listener*>(this));
  std::uint64_t frames = 0;
  std::uint64_t unroutable = 0;
  handoff_error_ = stream_.parse([&](const frame_view& f, const frame_slice& s) {
    ++frames;
    if (!router.route(f.address, s)) ++unroutable;
  });
  // Frames that arrived whole before a protocol error are still routed.
  handoff_pause_ = router.flush(listener).pause;
  handoff_frames_ = frames;
  if (frames) ctx_.stats.frames_received.fetch_add(frames, std::memory_order_relaxed);
  if (unroutable) ctx_.stats.unroutable.fetch_add(unroutable, std::memory_order_relaxed);
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    lf_pool::promote_new_leader();
    self->on_handoff_done();
  });
}

void supplier_session::on_handoff_done() {
  handed_off_ = false;
  const bool resumed = resumed_while_handed_off_;
  resumed_while_handed_off_ = false;
  if (handoff_frames_) last_progress_ = std::chrono::steady_clock::now();
  if (closed_) return stream_.release_if_idle();
  if (handoff_error_) return fail_protocol(handoff_error_);
  if (handoff_pause_ && !resumed) {
    paused_ = true;
    ctx_.stats.backpressure_pauses.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (paused_) return;  // held by the gateway (drain) while the worker ran
  stream_.release_if_idle();
  do_wait();
}

void supplier_session::fail_protocol(const frame_stream::stream_error& e) {
  ctx_.stats.protocol_errors[static_cast<std::size_t>(e.reason)].fetch_add(
      1, std::memory_order_relaxed);
  GW_LOG(warning) << "supplier " << peer_ << ": protocol error " << to_string(e.reason)
                  << " at byte offset " << e.offset << "; closing the connection";
  close();
}

void supplier_session::close() {
  if (closed_) return;
  closed_ = true;
  std::error_code ignored;
  idle_timer_.cancel();
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  if (!handed_off_) stream_.release_if_idle();  // else a worker still parses it
}

void supplier_session::arm_idle_timer(std::chrono::steady_clock::duration after) {
  idle_timer_.expires_after(after);
  idle_timer_.async_wait(
      [self = shared_from_this()](std::error_code ec) { self->on_idle_timer(ec); });
}

void supplier_session::on_idle_timer(std::error_code ec) {
  lf_pool::promote_new_leader();
  if (ec || closed_) return;
  // A supplier we paused (backpressure, drain) cannot make progress; that is not idleness.
  if (paused_) last_progress_ = std::chrono::steady_clock::now();
  // The timer is re-armed for the remainder instead of reset on every read: reads stay cheap.
  const auto idle = std::chrono::steady_clock::now() - last_progress_;
  if (idle < ctx_.idle_timeout) return arm_idle_timer(ctx_.idle_timeout - idle);
  ctx_.stats.closed[static_cast<std::size_t>(close_reason::idle_timeout)].fetch_add(
      1, std::memory_order_relaxed);
  GW_LOG(info) << "supplier " << peer_ << ": no whole frame for "
               << std::chrono::duration_cast<std::chrono::milliseconds>(idle).count()
               << " ms; closing (idle timeout)";
  close();
}

}  // namespace gatewayd::suppliers
