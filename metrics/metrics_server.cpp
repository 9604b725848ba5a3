#include "metrics/metrics_server.hpp"

#include <stdexcept>
#include <string>
#include <vector>

namespace gatewayd::metrics {
namespace {

// civetweb gives each connection a thread of its own from a fixed set, for as long as the
// request takes to arrive: a client trickling requests (slowloris) holds one thread per
// connection. prometheus-cpp's default is 2 threads and civetweb's header timeout 30 s, so two
// slow connections stopped every scrape. With 16 threads, up to 15 slow connections cost a
// scrape nothing; beyond that a scrape waits in civetweb's queue behind them, each thread
// freed after at most the header timeout (docs/security.md has the numbers).
constexpr int server_threads = 16;
// Prometheus sends a scrape's request in one write; 2 s for its headers is plenty.
constexpr int request_timeout_ms = 2000;

}  // namespace

metrics_server::metrics_server(const net::endpoint& listen) {
  // civetweb wants "[v6]:port" or "v4:port"; the endpoint's own text form is exactly that.
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", listen.to_string(), "num_threads", std::to_string(server_threads),
        "request_timeout_ms", std::to_string(request_timeout_ms)});
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot serve metrics on " + listen.to_string() + ": " + e.what());
  }
}

void metrics_server::add(std::shared_ptr<prometheus::Collectable> c) {
  exposer_->RegisterCollectable(c);
  collectables_.push_back(std::move(c));  // the exposer keeps only a weak_ptr
}

unsigned short metrics_server::port() const {
  const auto ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : static_cast<unsigned short>(ports.front());
}

}  // namespace gatewayd::metrics
