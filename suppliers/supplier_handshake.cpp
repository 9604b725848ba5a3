// A TLS supplier's handshake and the end of its TLS connection: the server side of the
// handshake with its deadline, the identity and record layer it yields, and how a failure,
// before or after the handshake, is counted and told.
#include <utility>

#include "runtime/log.hpp"
#include "suppliers/session_registry.hpp"
#include "suppliers/supplier_session.hpp"

namespace gatewayd::suppliers {

void supplier_session::do_handshake() {
  tls_context_ = ctx_.tls->load();
  std::error_code ec;
  tls_ =
      net::tls_channel::make(socket_, tls_context_->native_handle(), net::tls_channel::side::server,
                             ctx_.kernel_tls.load(std::memory_order_relaxed), ec);
  if (!tls_) return fail_handshake(net::tls_failure::protocol, ec);
  // (The session started in state handshaking: a stop may hold it meanwhile.)
  arm_handshake_deadline();
  // Its first bytes (the ClientHello) before OpenSSL's part: from then on it is a handshake under
  // way, which a connection that has sent nothing never evicts (session_registry).
  socket_.async_wait(asio::socket_base::wait_read, [self = shared_from_this()](std::error_code e) {
    if (self->in(state::closed)) return;  // the deadline passed, or it was evicted or stopped
    if (!e) self->ctx_.registry.handshake_progressed(self->handshake_ticket_);
    self->tls_->async_handshake([self](std::error_code done) { self->on_handshake(done); });
  });
}

void supplier_session::on_handshake(std::error_code ec) {
  if (in(state::closed)) return;  // the deadline passed, or the gateway stopped us
  handshake_deadline_.cancel();
  end_handshake();
  if (ec) {
    const long verify = SSL_get_verify_result(tls_->native_handle());
    return fail_handshake(net::classify_tls_failure(ec, verify), ec);
  }
  // Authenticated now: it needs a place under max_supplier_connections (free, or given up by
  // the session paused longest behind a stalled consumer), or it is refused.
  if (!ctx_.registry.take_place(this)) {
    ctx_.stats.closed[static_cast<std::size_t>(close_reason::connection_limit)].fetch_add(
        1, std::memory_order_relaxed);
    GW_LOG_LIMITED(warning, "refused supplier connections")
        << "refused supplier " << peer_ << " (connection_limit) after its TLS handshake";
    return close(not_a_frame);
  }
  ctx_.stats.tls_handshakes.fetch_add(1, std::memory_order_relaxed);
  const net::tls_records records = tls_->records();
  ctx_.stats.tls_connections[static_cast<std::size_t>(records)].fetch_add(
      1, std::memory_order_relaxed);
  stats_.tls_records.store(static_cast<std::uint8_t>(1 + static_cast<unsigned>(records)),
                           std::memory_order_relaxed);
  identity_ = net::tls_peer_identity(tls_->native_handle());
  GW_LOG(debug) << "supplier " << peer_ << ": " << SSL_get_version(tls_->native_handle())
                << ", records: " << net::to_string(records)
                << (identity_.empty() ? std::string{", no client certificate"}
                                      : ", identity \"" + log::escaped(identity_) + '"');
  begin_reading();
}

// One counter by reason and one rate-limited line: a scan of the port cannot flood the log.
void supplier_session::fail_handshake(net::tls_failure why, const std::error_code& ec) {
  ctx_.stats.tls_failures[static_cast<std::size_t>(why)].fetch_add(1, std::memory_order_relaxed);
  GW_LOG_LIMITED(warning, "supplier TLS handshake failures")
      << "supplier " << peer_ << ": TLS handshake failed (" << net::to_string(why) << ")"
      << (ec ? ": " + ec.message() : std::string{}) << "; closing";
  close(not_a_frame);
}

void supplier_session::fail_tls(const std::error_code& ec) {
  const net::tls_error why = net::classify_tls_error(ec);
  ctx_.stats.tls_errors[static_cast<std::size_t>(why)].fetch_add(1, std::memory_order_relaxed);
  GW_LOG_LIMITED(warning, "supplier TLS connections failed")
      << "supplier " << peer_ << ": TLS connection failed (" << net::to_string(why)
      << "): " << ec.message() << " at byte offset " << stream_.offset() << "; closing";
  close(partial_discard::tls_error);
}

void supplier_session::arm_handshake_deadline() {
  handshake_deadline_.expires_after(ctx_.handshake_timeout);
  handshake_deadline_.async_wait([self = shared_from_this()](std::error_code ec) {
    // Its end may have been ready before on_handshake cancelled the wait: OpenSSL says whether
    // the handshake is done (a stop may hold the session meanwhile, so the state cannot).
    if (ec || self->in(state::closed) || SSL_is_init_finished(self->tls_->native_handle())) return;
    self->fail_handshake(net::tls_failure::timeout, {});
  });
}

void supplier_session::begin_handshake() {
  handshake_ticket_ = ctx_.registry.begin_handshake(
      handshake_source_of(peer_address_),
      [weak = std::weak_ptr<supplier_session>(shared_from_this())] {
        if (const auto self = weak.lock()) {
          asio::post(self->socket_.get_executor(), [self] { self->evict_handshake(); });
        }
      });
}

void supplier_session::evict_handshake() {
  // Closed meanwhile (failed, timed out, stopped), or done (its place taken or refused): nothing
  // to evict. (Posted after do_handshake, which start() posted first: tls_ is made or closed.)
  if (in(state::closed) || !tls_ || SSL_is_init_finished(tls_->native_handle())) return;
  ctx_.stats.closed[static_cast<std::size_t>(close_reason::handshake_evicted)].fetch_add(
      1, std::memory_order_relaxed);
  GW_LOG_LIMITED(warning, "supplier handshakes evicted")
      << "supplier " << peer_
      << ": closing the connection (handshake_evicted): the oldest of "
         "max_handshaking_connections still in its TLS handshake, its slot goes to a new one";
  handshake_ticket_ = 0;  // the registry let it go already
  close(not_a_frame);
}

void supplier_session::end_handshake() noexcept {
  if (handshake_ticket_ == 0) return;
  ctx_.registry.end_handshake(std::exchange(handshake_ticket_, 0));
}

void supplier_session::send_stalled() {
  // A later wait (for reading) may have begun after this one ended: only a wait still out
  // counts.
  if (in(state::closed) || !waiting_) return;
  fail_tls(net::make_error_code(net::tls_error::slow_peer));
}

}  // namespace gatewayd::suppliers
