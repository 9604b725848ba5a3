#include "gateway/supplier_listener.hpp"

#include <chrono>
#include <stdexcept>

#include "runtime/log.hpp"

namespace gatewayd::gateway {

supplier_listener::supplier_listener(const runtime::executor& ex,
                                     const config::service_config& settings, shared with)
    : allow_(settings.allow),
      routers_(with.readers, with.pool),
      session_ctx_{with.routes, with.stats, sessions_, settings.max_payload,
                   settings.idle_timeout} {
  session_ctx_.partial_budget = &with.partial_budget;
  session_ctx_.routers = &routers_;
  if (with.pool) session_ctx_.idle_threads = runtime::idle_thread_probe(*with.pool);
  session_ctx_.max_unconfirmed = settings.max_unconfirmed_frames;
  session_ctx_.confirm_timeout = settings.confirm_timeout;
  with.stats.confirm_ledger.set_limit(settings.max_confirm_ledger_bytes);
  if (const auto files = settings.tls_files()) {
    auto built = net::make_tls_server_context(*files);
    if (!built.context) throw std::runtime_error("[tls] " + built.error);
    use_tls(std::move(built));
    session_ctx_.tls = &tls_;
    session_ctx_.handshake_timeout = settings.tls_handshake_timeout;
    session_ctx_.kernel_tls.store(settings.tls_ktls == config::ktls_mode::automatic);
  }
  using acceptor = suppliers::supplier_acceptor;
  acceptor::proxy_options proxy;
  if (settings.proxy_protocol) proxy.from = acceptor::from_blocks(settings.proxy_from);
  // The allow list is read through allow_ at every accept, so that a reload can replace it.
  acceptor_ = std::make_shared<acceptor>(
      ex, settings.supplier_listen, session_ctx_, settings.max_supplier_connections,
      [this](const asio::ip::address& a) { return allow_.admits(a); }, std::move(proxy),
      settings.max_handshaking_connections);
}

void supplier_listener::start() {
  acceptor_->start();
}

void supplier_listener::stop() {
  acceptor_->stop();
}

void supplier_listener::use_tls(net::tls_server_context built) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const double now_s = std::chrono::duration<double>(now).count();
  if (!built.crl_scope.empty()) {
    GW_LOG(info) << "[tls] crl: " << built.crl_scope;
  }
  // A stale CRL is still used (nothing it revokes comes back): said, and shown by the gauge.
  for (const auto& c : built.crls) {
    if (c.next_update != 0 && c.next_update < now_s) {
      GW_LOG(warning) << "[tls] crl " << c.file << ": the CRL of " << c.issuer
                      << " is past its nextUpdate; still used, publish a new one";
    }
  }
  const bool with_crl = !built.crls.empty();
  tls_.store(std::move(built));
  if (with_crl) close_revoked();
}

std::size_t supplier_listener::close_revoked() {
  const auto context = tls_.load();
  if (!context) return 0;
  std::size_t checked = 0;
  sessions_.for_each([&](suppliers::supplier_session& s) {
    s.expel_if_revoked(context);
    ++checked;
  });
  return checked;
}

std::size_t supplier_listener::admit_only(std::vector<net::cidr_block> blocks) {
  allow_.replace(std::move(blocks));
  std::size_t expelled = 0;
  sessions_.for_each([&](suppliers::supplier_session& s) {
    if (allow_.admits(s.peer_address())) return;
    s.expel(suppliers::close_reason::not_allowed);
    ++expelled;
  });
  return expelled;
}

}  // namespace gatewayd::gateway
