// The few /metrics series the benchmark driver reads (bench/gwbench), named as gatewayd names
// them, served over a minimal HTTP on a thread of its own (outside the model being measured).
#pragma once

#include <asio.hpp>
#include <functional>
#include <string>
#include <thread>

#include "harness_models.hpp"
#include "harness_supplier.hpp"
#include "net/endpoint.hpp"
#include "runtime/latency_histogram.hpp"

namespace gatewayd::harness {

// The Prometheus text of the harness's counters: consumers (connected, queue depth, sent,
// dropped by reason, blocked by cause), suppliers, unroutable frames and, under
// Leader/Followers, the pool's roles and promotion latency.
std::string render_metrics(const harness_context& ctx, const model_runner& runner,
                           const runtime::latency_histogram& promotion);

class metrics_server {
 public:
  // Binds `at` (throws) and answers GET /metrics with render() until destroyed.
  metrics_server(const net::endpoint& at, std::function<std::string()> render);
  ~metrics_server();
  metrics_server(const metrics_server&) = delete;
  metrics_server& operator=(const metrics_server&) = delete;

  asio::ip::tcp::endpoint local_endpoint() const { return acceptor_.local_endpoint(); }

 private:
  void do_accept();

  asio::io_context ioc_;
  asio::ip::tcp::acceptor acceptor_;
  std::function<std::string()> render_;
  std::thread thread_;
};

}  // namespace gatewayd::harness
