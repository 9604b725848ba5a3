#include "gateway/gateway.hpp"

#include <csignal>

#include <algorithm>
#include <chrono>
#include <exception>
#include <set>
#include <sstream>
#include <stdexcept>

#include "config/settings.hpp"
#include "metrics/gateway_collector.hpp"
#include "metrics/process_collector.hpp"
#include "net/kernel_tls_probe.hpp"
#include "routing/routing_table.hpp"
#include "runtime/log.hpp"
#include "runtime/thread_count.hpp"

namespace gatewayd::gateway {

gateway::gateway(config::service_config service, const config::routes_config& routes,
                 std::string routes_sha256)
    : service_(std::move(service)),
      partial_budget_(service_.max_partial_frame_bytes),
      ioc_(static_cast<int>(runtime::thread_count(service_.threads))),
      executor_(runtime::make_executor(ioc_)),
      control_(runtime::make_strand(executor_)),
      consumers_(executor_, control_, service_, supplier_stats_.not_permitted),
      pool_(ioc_, service_.threads, promotion_, service_.idle_poll),
      signals_(executor_),
      stop_timer_(control_),
      notify_(executor_),
      watchdog_(executor_, notify_),
      log_flush_(executor_, std::chrono::seconds(1), [] { log::flush_suppressed(); }),
      memory_check_(executor_, std::chrono::milliseconds(250), [this] { queue_memory_.check(); }) {
  listener_ = std::make_unique<supplier_listener>(
      executor_, service_,
      supplier_listener::shared{consumers_.routes(), supplier_stats_, partial_budget_,
                                consumers_.readers(), &pool_});
  log_kernel_tls(routes);
  signals_.take();
  reloader_ = std::make_unique<reloader>(executor_, control_,
                                         reloader::parts{service_, consumers_, *listener_, notify_},
                                         routes.consumers);
  consumers_.apply(routes, std::move(routes_sha256), routing::routing_table::build(routes.rules()));
  if (service_.metrics_enabled) start_metrics();
  const auto ep = listener_->endpoint();
  GW_LOG(info) << "listening for suppliers on " << ep.address().to_string() << ":" << ep.port()
               << (listener_->tls() ? (service_.tls_client_ca.empty() ? " (TLS)" : " (mutual TLS)")
                                    : "")
               << " (" << pool_.size() << " threads, leader-followers)";
}

gateway::~gateway() {
  pool_.stop();
  pool_.join();
}

void gateway::start_metrics() {
  metrics_ =
      std::make_unique<metrics::metrics_server>(service_.metrics_listen, service_.metrics_allow);
  metrics_->add(std::make_shared<metrics::gateway_collector>(metrics::gateway_collector::sources{
      supplier_stats_, consumers_.routes(), promotion_, reloader_->stats(), consumers_.budget(),
      queue_memory_,
      [this] {
        const auto r = pool_.roles();
        return metrics::gateway_collector::thread_roles{r.leader, r.processing, r.follower,
                                                        pool_.promotions_without_follower(),
                                                        pool_.leadership_taken_back()};
      },
      GATEWAYD_VERSION, [this] { return certificates(); }, [this] { return crls(); }}));
  metrics_->add(std::make_shared<metrics::process_collector>());
  operator_api_ = std::make_unique<metrics::operator_api>(metrics::operator_api::sources{
      listener_->sessions(), consumers_.routes(), supplier_stats_, serving_, GATEWAYD_VERSION});
  operator_api_->serve_on(*metrics_);
  GW_LOG(info) << "serving metrics on " << service_.metrics_listen.host << ":" << metrics_->port()
               << "/metrics (and /healthz, /readyz, /connz, /routez)";
}

void gateway::run() {
  signals_.start([this](int signo) { on_signal(signo); });
  reloader_->watch();
  enter(lifecycle::serving);
  watchdog_.start();
  log_flush_.start();
  memory_check_.start();
  if (watchdog_.period().count()) {
    GW_LOG(info)
        << "systemd watchdog: pinging every "
        << std::chrono::duration_cast<std::chrono::milliseconds>(watchdog_.period()).count()
        << " ms";
  }
  // The listeners were bound in the constructor: connections are accepted from here on.
  notify_.ready(consumers_.status());
  pool_.start();
  pool_.join();
  deadline_.ended();  // a forced stop got the threads back: no need to end the process itself
  // What the rate limits still hold back, whether or not its second is over.
  log::flush_suppressed(log::rate_limit::clock::time_point::max());
  GW_LOG(info) << "gatewayd stopped";
}

// The supplier listener's certificates, then the TLS consumers' (CA bundles and client
// certificates), each file once: the family's only label is the file, and a CA bundle that
// several consumers (or the listener) share expires once.
std::vector<net::tls_certificate_expiry> gateway::certificates() const {
  std::vector<net::tls_certificate_expiry> all;
  if (const auto* tls = listener_->tls()) all = tls->expiry();
  const auto snapshot = consumers_.routes().load();
  if (!snapshot) return all;
  std::set<std::string> seen;
  for (const auto& c : all)
    seen.insert(c.file);
  std::set<std::string> added;
  for (const auto& spec : snapshot->specs) {
    if (!spec.tls) continue;
    for (const auto& c : spec.tls->expiry) {
      if (seen.count(c.file)) continue;
      all.push_back(c);
      added.insert(c.file);
    }
    seen.insert(added.begin(), added.end());
    added.clear();
  }
  return all;
}

// Kernel TLS is used only where the kernel has the TLS module loaded, which an unprivileged
// daemon cannot do: say once which record layer TLS connections will get, and how to change it.
void gateway::log_kernel_tls(const config::routes_config& routes) const {
  bool asked = listener_->tls() && service_.tls_ktls == config::ktls_mode::automatic;
  for (const auto& c : routes.consumers)
    asked = asked || (c.tls && c.tls->kernel_tls);
  if (!asked) return;
  // Asked as a connection asks it (TCP_ULP on a loopback socket): the packaged unit's
  // ProcSubset=pid hides /proc/sys, where the list of loaded ULPs is.
  switch (net::probe_kernel_tls()) {
    case net::kernel_tls_state::loaded:
      GW_LOG(info) << "kernel TLS: loaded; TLS connections with ktls = \"auto\" let the kernel "
                      "seal their records where the suite allows (gatewayd_tls_connections)";
      break;
    case net::kernel_tls_state::not_loaded:
      GW_LOG(info) << "kernel TLS: not loaded (a TCP socket refused the \"tls\" ULP); OpenSSL "
                      "seals and opens every record. `modprobe tls` offloads them";
      break;
    case net::kernel_tls_state::unknown:
      GW_LOG(info) << "kernel TLS: unknown (no loopback socket to ask the kernel on); connections "
                      "with ktls = \"auto\" use it where the kernel has it "
                      "(gatewayd_tls_connections says which)";
      break;
  }
}

// The supplier listener's CRLs, then the TLS consumers', each (file, issuer) once.
std::vector<net::tls_crl_update> gateway::crls() const {
  std::vector<net::tls_crl_update> all;
  if (const auto* tls = listener_->tls()) all = tls->crls();
  const auto snapshot = consumers_.routes().load();
  if (!snapshot) return all;
  for (const auto& spec : snapshot->specs) {
    if (!spec.tls) continue;
    for (const auto& c : spec.tls->crls) {
      const auto same = [&](const net::tls_crl_update& a) {
        return a.file == c.file && a.issuer == c.issuer;
      };
      if (std::find_if(all.begin(), all.end(), same) == all.end()) all.push_back(c);
    }
  }
  return all;
}

}  // namespace gatewayd::gateway
