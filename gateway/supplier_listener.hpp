// The supplier side as the gateway holds it: the listener, the sessions it accepted, and what a
// new connection is checked against and handshakes with (the allow list, the [tls] context).
#pragma once

#include <asio.hpp>
#include <cstddef>
#include <memory>
#include <vector>

#include "config/service_config.hpp"
#include "net/cidr_block.hpp"
#include "net/tls_context.hpp"
#include "runtime/byte_budget.hpp"
#include "runtime/executor.hpp"
#include "runtime/lf_pool.hpp"
#include "suppliers/allow_list.hpp"
#include "suppliers/frame_routers.hpp"
#include "suppliers/route_snapshot.hpp"
#include "suppliers/session_registry.hpp"
#include "suppliers/supplier_acceptor.hpp"
#include "suppliers/supplier_session.hpp"
#include "suppliers/supplier_stats.hpp"

namespace gatewayd::gateway {

class supplier_listener {
 public:
  // What the sessions share with the rest of the gateway, which outlives the listener.
  struct shared {
    const suppliers::route_snapshot_holder& routes;
    suppliers::supplier_stats& stats;
    runtime::byte_budget& partial_budget;
    suppliers::route_readers& readers;       // where the routers announce their passes
    const runtime::lf_pool* pool = nullptr;  // the threads the sessions run on (none: a test's)
  };

  // Loads the [tls] context `settings` names and binds the listener; throws on either error.
  // Connections are accepted from start() on.
  supplier_listener(const runtime::executor& ex, const config::service_config& settings,
                    shared with);
  supplier_listener(const supplier_listener&) = delete;
  supplier_listener& operator=(const supplier_listener&) = delete;

  void start();
  // Stops accepting (again: nothing); the sessions are left as they are.
  void stop();
  asio::ip::tcp::endpoint endpoint() const { return acceptor_->local_endpoint(); }

  // [tls]: what new connections handshake with (a reload stores a new context); null for a
  // plaintext listener, which a reload cannot turn into a TLS one.
  net::tls_context_holder* tls() noexcept { return session_ctx_.tls ? &tls_ : nullptr; }
  const net::tls_context_holder* tls() const noexcept { return session_ctx_.tls ? &tls_ : nullptr; }
  // [tls] ktls = "auto": new connections offer OpenSSL the kernel's record layer.
  void offer_kernel_tls(bool offer) noexcept { session_ctx_.kernel_tls.store(offer); }
  // New connections are checked against `blocks` from now on; open ones from networks it no
  // longer admits are closed, so that removing a network takes effect without a restart.
  // Returns how many were.
  std::size_t admit_only(std::vector<net::cidr_block> blocks);
  // New connections handshake with `built` from now on (a reload's, checked); with a crl, its
  // scope and any CRL past its nextUpdate are logged, and every open TLS session whose
  // certificate it revokes is closed, on its own strand (counted there).
  void use_tls(net::tls_server_context built);

  suppliers::session_registry& sessions() noexcept { return sessions_; }
  const suppliers::session_registry& sessions() const noexcept { return sessions_; }

 private:
  // Asks every session to check its certificate against the current context; how many were.
  std::size_t close_revoked();

  suppliers::session_registry sessions_;
  suppliers::allow_list allow_;  // gateway.allow, read by the acceptor's threads
  net::tls_context_holder tls_;
  suppliers::frame_routers routers_;  // one per pool thread, shared by the sessions
  suppliers::session_context session_ctx_;
  std::shared_ptr<suppliers::supplier_acceptor> acceptor_;
};

}  // namespace gatewayd::gateway
