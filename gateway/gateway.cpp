#include "gateway/gateway.hpp"

#include <csignal>

#include <chrono>

#include "gateway/log.hpp"
#include "metrics/gateway_collector.hpp"
#include "metrics/process_collector.hpp"
#include "routing/routing_table.hpp"

namespace gatewayd::gateway {

gateway::gateway(service_config service, const routing::routing_config& routes)
    : service_(std::move(service)),
      ioc_(static_cast<int>(service_.threads ? service_.threads
                                             : std::max(1u, std::thread::hardware_concurrency()))),
      pool_(ioc_, service_.threads, promotion_),
      budget_(service_.max_queued_bytes),
      session_ctx_{routes_, supplier_stats_, sessions_, service_.max_payload,
                   service_.idle_timeout},
      signals_(ioc_),
      control_(asio::make_strand(ioc_)) {
  model_ = make_execution_model(service_.concurrency, ioc_, pool_, service_.threads);
  session_ctx_.handoff = model_->handoff();
  apply_routing(routes);
  reloads_.last_success_unix_seconds =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  suppliers::supplier_acceptor::admission allow;
  if (!service_.allow.empty()) {
    allow = [this](const asio::ip::address& a) {
      if (a.is_v4()) {
        const auto b = a.to_v4().to_bytes();
        return service_.allows(b);
      }
      const auto b = a.to_v6().to_bytes();
      return service_.allows(b);
    };
  }
  acceptor_ = std::make_shared<suppliers::supplier_acceptor>(
      ioc_, service_.supplier_listen, session_ctx_, service_.max_supplier_connections,
      std::move(allow));
  if (service_.metrics_enabled) start_metrics();
  const auto ep = acceptor_->local_endpoint();
  GW_LOG(info) << "listening for suppliers on " << ep.address().to_string() << ":" << ep.port()
               << " (" << model_->size() << " threads, " << to_string(service_.concurrency)
               << (service_.consumer_drain == consumer_drain_model::mutex ? ", consumer drain mutex"
                                                                          : "")
               << ")";
}

gateway::~gateway() {
  model_->stop();
  model_->join();
}

void gateway::apply_routing(const routing::routing_config& routes) {
  auto snapshot = std::make_shared<suppliers::route_snapshot>();
  snapshot->table = routing::routing_table::build(routes);
  consumers::consumer::options options;
  options.reconnect_initial = service_.reconnect_initial;
  options.reconnect_max = service_.reconnect_max;
  options.budget = &budget_;
  if (service_.consumer_drain == consumer_drain_model::mutex) {
    options.drain = consumers::consumer::drain_model::mutex;
  }

  std::map<std::string, std::shared_ptr<consumers::consumer>> next;
  for (const auto& spec : routes.consumers) {
    std::shared_ptr<consumers::consumer> c;
    if (auto it = consumers_.find(spec.name); it != consumers_.end()) {
      c = it->second;
      c->reconfigure(spec);
    } else {
      c = std::make_shared<consumers::consumer>(ioc_, spec, options);
      c->start();
    }
    snapshot->consumers.push_back(c);
    next.emplace(spec.name, std::move(c));
  }
  // Publish first: from here on no session routes to a consumer that is about to go.
  routes_.publish(std::move(snapshot));
  for (auto& [name, c] : consumers_) {
    if (next.count(name)) continue;
    GW_LOG(info) << "consumer " << name << " removed; draining for up to "
                 << service_.drain_timeout.count() << " ms";
    c->drain_and_close(service_.drain_timeout, consumers::drop_reason::removed,
                       [n = name](std::uint64_t left) {
                         GW_LOG(info) << "consumer " << n << " closed after removal, " << left
                                      << " frames undelivered";
                       });
  }
  consumers_ = std::move(next);
}

void gateway::start_metrics() {
  metrics_ = std::make_unique<metrics::metrics_server>(service_.metrics_listen);
  metrics_->add(std::make_shared<metrics::gateway_collector>(metrics::gateway_collector::sources{
      supplier_stats_, routes_, promotion_, reloads_, budget_,
      [this] {
        const auto r = model_->roles();
        return metrics::gateway_collector::thread_roles{r.leader, r.processing, r.follower};
      },
      GATEWAYD_VERSION}));
  metrics_->add(std::make_shared<metrics::process_collector>());
  GW_LOG(info) << "serving metrics on " << service_.metrics_listen.host << ":" << metrics_->port()
               << "/metrics";
}

void gateway::run() {
  signals_.add(SIGINT);
  signals_.add(SIGTERM);
  wait_for_signal();
  acceptor_->start();
  model_->start();
  model_->join();
  GW_LOG(info) << "gatewayd stopped";
}

void gateway::wait_for_signal() {
  signals_.async_wait(asio::bind_executor(control_, [this](std::error_code ec, int signo) {
    lf_pool::promote_new_leader();
    if (!ec) on_signal(signo);
  }));
}

void gateway::on_signal(int signo) {
  GW_LOG(info) << "received " << (signo == SIGINT ? "SIGINT" : "SIGTERM") << "; shutting down";
  begin_shutdown();
}

void gateway::shutdown() {
  asio::post(control_, [this] {
    lf_pool::promote_new_leader();
    begin_shutdown();
  });
}

void gateway::begin_shutdown() {
  if (shutting_down_) return;
  shutting_down_ = true;
  std::error_code ignored;
  signals_.cancel(ignored);
  acceptor_->stop();
  // No new frames come in while the queues drain: suppliers stay connected but unread.
  sessions_.for_each([](suppliers::supplier_session& s) { s.pause_reading(); });
  draining_ = consumers_.size();
  if (draining_ == 0) return finish_shutdown();
  for (auto& [name, c] : consumers_) {
    c->drain_and_close(service_.drain_timeout, consumers::drop_reason::shutdown,
                       [this, n = name](std::uint64_t left) {
                         asio::post(control_, [this, n, left] {
                           lf_pool::promote_new_leader();
                           if (left) {
                             GW_LOG(warning) << "consumer " << n << ": " << left
                                             << " frames undelivered at shutdown";
                           }
                           undelivered_ += left;
                           if (--draining_ == 0) finish_shutdown();
                         });
                       });
  }
}

void gateway::finish_shutdown() {
  GW_LOG(info) << "drain finished: " << undelivered_ << " frames undelivered";
  sessions_.for_each([](suppliers::supplier_session& s) { s.stop(); });
  // With the acceptor, sessions, consumers and signals closed, the io_context runs out of
  // work and the pool's threads leave on their own.
}

}  // namespace gatewayd::gateway
