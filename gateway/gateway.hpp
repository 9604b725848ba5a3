// The daemon: owns the io_context, the thread pool, the supplier listener, the consumers and
// the routing snapshot, and the order in which they start, reload and stop.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/routes_config.hpp"
#include "config/service_config.hpp"
#include "consumers/consumer.hpp"
#include "consumers/queue_memory.hpp"
#include "gateway/consumer_set.hpp"
#include "gateway/reloader.hpp"
#include "gateway/signal_watch.hpp"
#include "gateway/stop_deadline.hpp"
#include "gateway/supplier_listener.hpp"
#include "gateway/systemd_notify.hpp"
#include "gateway/watchdog.hpp"
#include "metrics/metrics_server.hpp"
#include "metrics/operator_api.hpp"
#include "metrics/serving_state.hpp"
#include "runtime/byte_budget.hpp"
#include "runtime/executor.hpp"
#include "runtime/latency_histogram.hpp"
#include "runtime/lf_pool.hpp"
#include "runtime/periodic_timer.hpp"
#include "suppliers/route_snapshot.hpp"
#include "suppliers/supplier_stats.hpp"

namespace gatewayd::gateway {

class gateway {
 public:
  // Builds everything and binds the listeners; throws on a start-up error (bad bind, ...).
  // `routes_sha256` names the routes file's bytes (gatewayd_config_info, /routez).
  gateway(config::service_config service, const config::routes_config& routes,
          std::string routes_sha256);
  ~gateway();
  gateway(const gateway&) = delete;
  gateway& operator=(const gateway&) = delete;

  // Runs until SIGINT/SIGTERM (or shutdown()) has drained and stopped everything. SIGHUP
  // and a change of the configuration files reload (see reload()). A stop that outlives its
  // deadline is forced (logged as an error, what was left named) and returns all the same.
  void run();

  // How much longer than lame_duck_ms + drain_timeout_ms a stop may take, all told: it is
  // forced stop_grace - stop_leave_grace after them, and the pool's threads then have
  // stop_leave_grace to leave before the process ends without them.
  static constexpr std::chrono::milliseconds stop_grace{2000};
  static constexpr std::chrono::milliseconds stop_leave_grace{500};
  // Starts the graceful stop from any thread: stop accepting and reading, drain, exit.
  void shutdown();

  // Re-reads both configuration files from any thread, on the control strand: all or
  // nothing (an error keeps the running table), settings that cannot change live warned.
  void reload(std::string trigger) { reloader_->request(std::move(trigger)); }

  asio::ip::tcp::endpoint supplier_endpoint() const { return listener_->endpoint(); }
  const suppliers::supplier_stats& supplier_stats() const noexcept { return supplier_stats_; }
  const suppliers::route_snapshot_holder& routes() const noexcept { return consumers_.routes(); }
  const runtime::latency_histogram& promotion_latency() const noexcept { return promotion_; }
  const config::service_config& settings() const noexcept { return service_; }
  // The metrics port actually bound (0 when metrics are disabled).
  unsigned short metrics_port() const { return metrics_ ? metrics_->port() : 0; }

 private:
  // On the signal watch's strand: SIGHUP reloads, SIGINT/SIGTERM stop, a second one cuts it short.
  void on_signal(int signo);
  // The stop, in gateway_stop.cpp: lame duck, suppliers asked to leave, drain, exit.
  // The daemon's life, forward only. Each state's entry (listener, /readyz, sessions, reloads)
  // is done by enter() alone, on control_ (or in run(), before the threads start).
  enum class lifecycle { starting, serving, lame_duck, suppliers_leaving, draining, stopped };
  // False (nothing done) when the gateway is already there or past it.
  bool enter(lifecycle next);
  void begin_shutdown();
  void ask_suppliers_to_leave();
  void wait_for_suppliers(std::chrono::steady_clock::time_point leave_by);
  void drain_consumers(std::chrono::milliseconds within);
  void cut_drain_short();
  // On the stop deadline's own thread (stop_deadline): never touches what the strands own.
  void force_stop(const std::vector<std::shared_ptr<consumers::consumer>>& consumers);
  [[noreturn]] void abandon_stop();
  void finish_shutdown(std::uint64_t undelivered);
  void start_metrics();
  void log_kernel_tls(const config::routes_config& routes) const;
  // What gatewayd_tls_certificate_expiry_timestamp_seconds shows (any thread, at scrape time).
  std::vector<net::tls_certificate_expiry> certificates() const;
  // What gatewayd_tls_crl_next_update_timestamp_seconds shows (any thread, at scrape time).
  std::vector<net::tls_crl_update> crls() const;

  config::service_config service_;
  // max_partial_frame_bytes. Before ioc_: sessions that the io_context's destruction frees give
  // their share back here.
  runtime::byte_budget partial_budget_;
  // Before ioc_ too: its confirm ledger budget takes back what frames settled by consumers (and
  // sessions) the io_context's destruction frees held.
  suppliers::supplier_stats supplier_stats_;
  asio::io_context ioc_;
  runtime::executor executor_;  // what every part below is given: never the io_context itself
  runtime::latency_histogram promotion_;
  runtime::strand control_;  // reloads and shutdown, one at a time
  consumer_set consumers_;   // and the route snapshot that names them
  runtime::lf_pool pool_;    // the threads that run the handlers (Leader/Followers)
  // The listener, its sessions, the allow list and the [tls] context.
  std::unique_ptr<supplier_listener> listener_;
  std::unique_ptr<reloader> reloader_;  // built after listener_, which it reloads
  signal_watch signals_;
  // Set by the first SIGINT/SIGTERM (or shutdown()), on any thread, so that the next one cuts
  // the stop short without waiting for control_ to enter the stop's states.
  std::atomic<bool> stop_requested_{false};
  asio::steady_timer stop_timer_;  // on control_: the lame duck, then the suppliers' leaving
  systemd_notify notify_;
  watchdog watchdog_;
  runtime::periodic_timer log_flush_;  // reports rate-limited log lines held back
  consumers::queue_memory queue_memory_{consumers_.budget()};  // checked by memory_check_ alone
  runtime::periodic_timer memory_check_;  // hands back what drained queues let go of
  metrics::serving_state serving_;
  std::unique_ptr<metrics::operator_api> operator_api_;  // outlives metrics_, which calls it
  std::unique_ptr<metrics::metrics_server> metrics_;
  lifecycle state_ = lifecycle::starting;                   // on control_: see enter()
  std::chrono::steady_clock::time_point drain_deadline_{};  // lame duck: the drain ends by then
  // Last: its thread, if a stop started it, reads the members above until it is joined.
  stop_deadline deadline_;
};

}  // namespace gatewayd::gateway
