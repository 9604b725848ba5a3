// How a supplier session ends: closed by the gateway (a stop, the allow list, the connection
// cap, a limit the peer hit, idleness) or by its peer; each end counted and logged by reason,
// with what it received only in part.
#include "net/tls_crl.hpp"
#include "runtime/log.hpp"
#include "suppliers/supplier_session.hpp"

namespace gatewayd::suppliers {

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

void supplier_session::expel_if_revoked(std::shared_ptr<asio::ssl::context> tls) {
  asio::post(socket_.get_executor(), [self = shared_from_this(), tls = std::move(tls)] {
    // Still in its handshake: it verifies against the context it started with (the window of
    // one reload); a plaintext or already closed session has no certificate to check.
    if (self->in(state::closed) || !self->tls_ ||
        !SSL_is_init_finished(self->tls_->native_handle()))
      return;
    if (!net::tls_peer_revoked(self->tls_->native_handle(), tls->native_handle())) return;
    self->ctx_.stats.closed[static_cast<std::size_t>(close_reason::revoked)].fetch_add(
        1, std::memory_order_relaxed);
    GW_LOG_LIMITED(warning, "supplier connections revoked")
        << "supplier " << self->peer_ << " (identity \"" << log::escaped(self->identity_)
        << "\"): closing the connection (revoked): the reloaded [tls] crl revokes its certificate";
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

void supplier_session::ask_to_leave() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    if (self->in(state::closed)) return;
    // TLS: close_notify before the FIN, or the supplier sees a cut stream, not a goodbye.
    if (self->tls_) self->tls_->close_notify();
    std::error_code ignored;
    self->socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
  });
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
  idle_.stop();
  pause_timer_.cancel();
  handshake_deadline_.cancel();
  tls_read_.end_wait();
  end_handshake();
  if (replies_) replies_->close();  // what consumers still owe settles into a ledger nobody reads
  if (tls_) tls_->close_notify();   // the supplier sees our close, not a cut
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

void supplier_session::idle_expired(std::chrono::steady_clock::duration idle) {
  if (in(state::closed)) return;
  ctx_.stats.closed[static_cast<std::size_t>(close_reason::idle_timeout)].fetch_add(
      1, std::memory_order_relaxed);
  GW_LOG_LIMITED(info, "supplier idle timeouts")
      << "supplier " << peer_ << ": no whole frame for "
      << std::chrono::duration_cast<std::chrono::milliseconds>(idle).count()
      << " ms; closing (idle timeout)";
  close(partial_discard::idle_timeout);
}

}  // namespace gatewayd::suppliers
