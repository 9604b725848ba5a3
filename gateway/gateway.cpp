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
#include "routing/routing_table.hpp"
#include "runtime/log.hpp"

namespace gatewayd::gateway {

gateway::gateway(config::service_config service, const config::routes_config& routes,
                 std::string routes_sha256)
    : service_(std::move(service)),
      started_from_(stamp_files(watched_files(&routes.consumers))),
      partial_budget_(service_.max_partial_frame_bytes),
      ioc_(static_cast<int>(runtime::thread_count(service_.threads))),
      executor_(runtime::make_executor(ioc_)),
      control_(runtime::make_strand(executor_)),
      consumers_(executor_, control_, service_, supplier_stats_.not_permitted),
      signals_(ioc_),
      signal_strand_(runtime::make_strand(executor_)),
      stop_timer_(control_),
      notify_(executor_),
      watchdog_(executor_, notify_),
      log_flush_(executor_, std::chrono::seconds(1), [] { log::flush_suppressed(); }) {
  model_ = runtime::make_execution_model(service_.concurrency, ioc_, service_.threads, promotion_,
                                         service_.idle_poll);
  listener_ = std::make_unique<supplier_listener>(
      executor_, service_,
      supplier_listener::shared{consumers_.routes(), supplier_stats_, partial_budget_,
                                model_->handoff()});
  log_kernel_tls(routes);
  // Signals are ours from here on: a SIGHUP during start-up must not end the process.
  signals_.add(SIGINT);
  signals_.add(SIGTERM);
  signals_.add(SIGHUP);
  consumers_.apply(routes, std::move(routes_sha256), routing::routing_table::build(routes.rules()));
  reloads_.last_success_unix_seconds =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (service_.metrics_enabled) start_metrics();
  const auto ep = listener_->endpoint();
  GW_LOG(info)
      << "listening for suppliers on " << ep.address().to_string() << ":" << ep.port()
      << (listener_->tls() ? (service_.tls_client_ca.empty() ? " (TLS)" : " (mutual TLS)") : "")
      << " (" << model_->size() << " threads, " << runtime::to_string(service_.concurrency)
      << (service_.consumer_drain == consumers::drain_model::mutex ? ", consumer drain mutex" : "")
      << ")";
}

gateway::~gateway() {
  model_->stop();
  model_->join();
}

void gateway::start_metrics() {
  metrics_ =
      std::make_unique<metrics::metrics_server>(service_.metrics_listen, service_.metrics_allow);
  metrics_->add(std::make_shared<metrics::gateway_collector>(metrics::gateway_collector::sources{
      supplier_stats_, consumers_.routes(), promotion_, reloads_, consumers_.budget(),
      [this] {
        const auto r = model_->roles();
        return metrics::gateway_collector::thread_roles{r.leader, r.processing, r.follower,
                                                        model_->saturated(), model_->taken_back()};
      },
      GATEWAYD_VERSION, [this] { return certificates(); }}));
  metrics_->add(std::make_shared<metrics::process_collector>());
  operator_api_ = std::make_unique<metrics::operator_api>(metrics::operator_api::sources{
      listener_->sessions(), consumers_.routes(), supplier_stats_, serving_, GATEWAYD_VERSION});
  operator_api_->serve_on(*metrics_);
  GW_LOG(info) << "serving metrics on " << service_.metrics_listen.host << ":" << metrics_->port()
               << "/metrics (and /healthz, /readyz, /connz, /routez)";
}

void gateway::run() {
  wait_for_signal();
  try {
    watcher_ = std::make_unique<config_watcher>(executor_, [this] { reload("file changed"); });
    watcher_->reading(std::move(started_from_));
    watcher_->watch(watched_files());
  } catch (const std::exception& e) {
    GW_LOG(warning) << "not watching the configuration files (" << e.what()
                    << "); reload with SIGHUP";
  }
  listener_->start();
  serving_.listening.store(true);
  watchdog_.start();
  log_flush_.start();
  if (watchdog_.period().count()) {
    GW_LOG(info)
        << "systemd watchdog: pinging every "
        << std::chrono::duration_cast<std::chrono::milliseconds>(watchdog_.period()).count()
        << " ms";
  }
  // The listeners were bound in the constructor: connections are accepted from here on.
  notify_.ready(consumers_.status());
  model_->start();
  model_->join();
  deadline_.ended();  // a forced stop got the threads back: no need to end the process itself
  // What the rate limits still hold back, whether or not its second is over.
  log::flush_suppressed(log::rate_limit::clock::time_point::max());
  GW_LOG(info) << "gatewayd stopped";
}

void gateway::reload(std::string trigger) {
  asio::post(control_, [this, trigger = std::move(trigger)] { do_reload(trigger); });
}

// On the control strand. Validates both files whole and builds the new table off to the side
// before touching anything: a failure leaves the running table, consumers and settings as
// they were.
void gateway::do_reload(std::string_view trigger) {
  if (shutting_down_ || stop_requested_.load()) return;
  std::string status = "reloading the configuration (";
  status += trigger;
  status += ')';
  notify_.reloading(status);
  auto loaded = config::load_full_config(service_.config_file);
  if (!loaded.config) {
    for (const auto& e : loaded.errors)
      GW_LOG(error) << e.to_string();
    return reload_failed(trigger, loaded.errors.size());
  }
  auto& next = *loaded.config;
  std::shared_ptr<const routing::routing_table> table;
  try {
    table = routing::routing_table::build(next.routing.rules());
  } catch (const std::exception& e) {
    GW_LOG(error) << next.service.routes_file.string() << ": " << e.what();
    return reload_failed(trigger, 1);
  }
  // consumer_drain takes a restart: a file that now says "strand" passed the loader's check, but
  // the running mutex drain has no TLS writer.
  if (service_.consumer_drain == consumers::drain_model::mutex) {
    for (const auto& c : next.routing.consumers) {
      if (!c.tls) continue;
      GW_LOG(error) << next.service.routes_file.string() << ": consumers." << c.name
                    << ".tls: the running consumer_drain \"mutex\" has no TLS writer (restart)";
      return reload_failed(trigger, 1);
    }
  }
  // The certificates are validated before anything is applied: a bad pair fails the whole
  // reload, and the running context (and table) stay.
  if (!reload_tls(next.service)) return reload_failed(trigger, 1);
  apply_settings(next.service);
  consumers_.apply(next.routing, std::move(next.routes_sha256), std::move(table));
  if (watcher_) watcher_->watch(watched_files());
  reloads_.succeeded.fetch_add(1);
  reloads_.last_successful.store(true);
  reloads_.last_success_unix_seconds.store(
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  GW_LOG(info) << "routing table reloaded (" << trigger << "): " << next.routing.consumers.size()
               << " consumers, " << next.routing.routes.size() << " routes";
  notify_.ready(consumers_.status());
}

std::vector<std::filesystem::path> gateway::watched_files(
    const std::vector<consumers::consumer_spec>* consumers) const {
  std::vector<std::filesystem::path> files{service_.config_file, service_.routes_file};
  if (const auto tls = service_.tls_files()) {
    files.push_back(tls->cert);
    files.push_back(tls->key);
    if (!tls->client_ca.empty()) files.push_back(tls->client_ca);
  }
  // The consumers' PEM files too: a certificate rotated in place reloads, and the consumers
  // whose files' digest changed redial with the new context.
  // (The constructor names its consumers: none is published yet when it stamps the files.)
  const auto snapshot = consumers ? nullptr : consumers_.routes().load();
  if (snapshot) consumers = &snapshot->specs;
  if (!consumers) return files;
  for (const auto& spec : *consumers) {
    if (!spec.tls) continue;
    for (const auto* f : {&spec.tls->files.ca, &spec.tls->files.cert, &spec.tls->files.key}) {
      if (!f->empty() && std::find(files.begin(), files.end(), *f) == files.end())
        files.push_back(*f);
    }
  }
  return files;
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

// The whole context is rebuilt, CA included (mosquitto's reload kept the old CA): new
// connections use the new one, open ones keep theirs.
bool gateway::reload_tls(const config::service_config& next) {
  auto* tls = listener_->tls();
  if (!tls) return true;  // a plaintext listener: turning TLS on takes a restart
  // New paths apply with the reload (apply_settings then takes them, and the watcher follows);
  // a file that turns TLS off keeps the running files, reread.
  const auto files = next.tls_files() ? next.tls_files() : service_.tls_files();
  auto built = net::make_tls_server_context(*files);
  if (!built.context) {
    GW_LOG(error) << "[tls] " << built.error
                  << "; new supplier connections keep the running "
                     "certificate, key and CA";
    return false;
  }
  tls->store(std::move(built));
  GW_LOG(info) << "[tls] certificate, key and CA reloaded from " << files->cert.string();
  return true;
}

void gateway::reload_failed(std::string_view trigger, std::size_t errors) {
  reloads_.failed.fetch_add(1);
  reloads_.last_successful.store(false);
  GW_LOG(error) << "reload (" << trigger << ") failed with " << errors
                << " configuration error(s); the running routing table stays in force";
  std::string status = consumers_.status();
  status += "; the last reload failed with ";
  status += std::to_string(errors);
  status += " error(s), see the journal";
  notify_.ready(status);
}

// What the settings table (config/settings.cpp) says a reload may change is applied; what
// needs a restart keeps its running value and the operator is told, not ignored.
void gateway::apply_settings(const config::service_config& next) {
  const auto plan = config::plan_reload(service_, next);
  for (const config::setting* s : plan.restart) {
    GW_LOG(warning) << service_.config_file.string() << ": " << s->path() << " changed from "
                    << s->text(service_) << " to " << s->text(next) << ": needs a restart; keeping "
                    << s->text(service_) << " until then";
  }
  if (plan.unclassified) {
    GW_LOG(error) << service_.config_file.string()
                  << ": a setting changed that the reload does not know; it is not applied";
  }
  // Read on this strand only, so plain assignment is enough.
  const bool allow_changed = service_.allow != next.allow;
  for (const config::setting* s : plan.live)
    s->copy(service_, next);
  log::set_level(service_.log_level);
  listener_->offer_kernel_tls(service_.tls_ktls == config::ktls_mode::automatic);
  if (allow_changed) apply_allow_list();
}

// New connections are checked against the new list from the swap on; open ones from networks
// it no longer admits are closed, so that removing a network takes effect without a restart.
void gateway::apply_allow_list() {
  const std::size_t expelled = listener_->admit_only(service_.allow);
  GW_LOG(info) << "allow list changed to " << service_.allow.size() << " block(s); closing "
               << expelled << " supplier connection(s) it no longer admits";
}

// Kernel TLS is used only where the kernel has the TLS module loaded, which an unprivileged
// daemon cannot do: say once which record layer TLS connections will get, and how to change it.
void gateway::log_kernel_tls(const config::routes_config& routes) const {
  bool asked = listener_->tls() && service_.tls_ktls == config::ktls_mode::automatic;
  for (const auto& c : routes.consumers)
    asked = asked || (c.tls && c.tls->kernel_tls);
  if (!asked) return;
  if (net::kernel_tls_loaded()) {
    GW_LOG(info) << "kernel TLS: loaded; TLS connections with ktls = \"auto\" let the kernel "
                    "seal their records where the suite allows (gatewayd_tls_connections)";
  } else {
    GW_LOG(info) << "kernel TLS: not loaded (no \"tls\" in /proc/sys/net/ipv4/tcp_available_ulp); "
                    "OpenSSL seals and opens every record. `modprobe tls` offloads them";
  }
}

}  // namespace gatewayd::gateway
