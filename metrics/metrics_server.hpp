// Serves /metrics and the operator endpoints over HTTP on [metrics] listen, with civetweb.
#pragma once

#include <prometheus/collectable.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "net/cidr_block.hpp"
#include "net/endpoint.hpp"

class CivetServer;

namespace gatewayd::metrics {

// civetweb's access_control_list for `allow`: every address refused, then each block admitted
// (its last match wins). IPv6 blocks only when `ipv6` (civetweb built with IPv6; Debian 12's is
// not, and refuses an IPv6 entry, while no IPv6 client can reach it either).
std::string civetweb_access_list(std::span<const net::cidr_block> allow, bool ipv6);

// prometheus-cpp's Exposer owns its civetweb server privately and can serve nothing but
// /metrics; this owns the civetweb server itself (the same Debian library the Exposer runs on)
// so /metrics and the operator endpoints share one listener, and serialises the registry with
// prometheus-cpp's text serializer. Requests are answered on civetweb's threads, never on the
// gateway's pool.
class metrics_server {
 public:
  struct response {
    int status = 200;
    std::string content_type = "application/json";
    std::string body;
  };
  // Answers a GET; `query` is the part after '?' (may be empty). Runs on a civetweb thread.
  using handler = std::function<response(std::string_view query)>;

  // Binds at once; a bind error throws (start-up), naming the address. Only clients from
  // `allow` (never empty) are served: civetweb closes any other connection as it accepts it,
  // before reading a byte.
  metrics_server(const net::endpoint& listen, std::span<const net::cidr_block> allow);
  // Stops the server without waiting out civetweb's 2 s listening poll (see the .cpp).
  ~metrics_server();
  metrics_server(const metrics_server&) = delete;
  metrics_server& operator=(const metrics_server&) = delete;

  // Served at /metrics, in the order added.
  void add(std::shared_ptr<prometheus::Collectable> c);
  // Serves GET `path` (exactly; civetweb also hands it `path/...`, which gets a 404).
  void handle(const std::string& path, handler h);
  unsigned short port() const;

  // What civetweb's callbacks (in the .cpp) reach through the server's user context.
  struct listener_state {
    std::atomic<bool> closing{false};  // civetweb's messages are not logged once set
    // Connections that hold one of civetweb's threads now (from the moment a thread takes one
    // until it is closed), for gatewayd_metrics_connections.
    std::atomic<std::int64_t> connections{0};
  };

 private:
  class endpoint;  // a CivetHandler calling a handler
  response scrape() const;

  class listener_collector;  // exports state_ as gatewayd_metrics_connections

  net::endpoint listen_;
  listener_state state_;
  mutable std::mutex mutex_;  // the collectables: added at start-up, read by every scrape
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
  std::vector<std::unique_ptr<endpoint>> endpoints_;  // outlive server_ (declared before it)
  std::unique_ptr<CivetServer> server_;
};

}  // namespace gatewayd::metrics
