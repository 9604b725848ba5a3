// Serves /metrics over HTTP (prometheus-cpp's exposer) on [metrics] listen.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>

#include <memory>
#include <vector>

#include "net/endpoint.hpp"

namespace gatewayd::metrics {

class metrics_server {
 public:
  // Binds at once; a bind error throws (start-up), naming the address.
  explicit metrics_server(const net::endpoint& listen);
  // Stops the exposer without waiting out civetweb's 2 s listening poll (see the .cpp).
  ~metrics_server();
  metrics_server(const metrics_server&) = delete;
  metrics_server& operator=(const metrics_server&) = delete;
  void add(std::shared_ptr<prometheus::Collectable> c);
  unsigned short port() const;

 private:
  net::endpoint listen_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
};

}  // namespace gatewayd::metrics
