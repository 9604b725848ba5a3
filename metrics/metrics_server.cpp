#include "metrics/metrics_server.hpp"

#include <stdexcept>

namespace gatewayd::metrics {

metrics_server::metrics_server(const net::endpoint& listen) {
  // civetweb wants "[v6]:port" or "v4:port"; the endpoint's own text form is exactly that.
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(listen.to_string(), 2);
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
