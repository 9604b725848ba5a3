// A TLS supplier's handshake: the server side of it, with its deadline, the identity it yields,
// and how a failure is counted and told.
#include "runtime/log.hpp"
#include "suppliers/supplier_session.hpp"

namespace gatewayd::suppliers {

void supplier_session::do_handshake() {
  tls_context_ = ctx_.tls->load();
  std::error_code ec;
  tls_ = net::tls_channel::make(socket_, tls_context_->native_handle(),
                                net::tls_channel::side::server, ec);
  if (!tls_) return fail_handshake(net::tls_failure::protocol, ec);
  handshaking_ = true;
  arm_idle_timer(ctx_.handshake_timeout);
  tls_->async_handshake([self = shared_from_this()](std::error_code e) { self->on_handshake(e); });
}

void supplier_session::on_handshake(std::error_code ec) {
  handshaking_ = false;
  if (closed_) return;  // the deadline passed, or the gateway stopped us
  idle_timer_.cancel();
  if (ec) {
    const long verify = SSL_get_verify_result(tls_->native_handle());
    return fail_handshake(net::classify_tls_failure(ec, verify), ec);
  }
  ctx_.stats.tls_handshakes.fetch_add(1, std::memory_order_relaxed);
  identity_ = net::tls_peer_identity(tls_->native_handle());
  GW_LOG(debug) << "supplier " << peer_ << ": " << SSL_get_version(tls_->native_handle())
                << (tls_->own_records() ? " (records: gatewayd)" : " (records: OpenSSL)")
                << (identity_.empty() ? std::string{", no client certificate"}
                                      : ", identity \"" + identity_ + '"');
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

}  // namespace gatewayd::suppliers
