// The operator's read-only JSON endpoints on the metrics listener: /healthz (alive), /readyz
// (serving), /connz (every supplier and consumer connection), /routez (the routing table in
// use, its sha256 and each route's hits). They read the live structures the way the metrics
// collector does: atomics, and the short leaf locks of the registries.
#pragma once

#include <string>
#include <string_view>

#include "metrics/metrics_server.hpp"
#include "metrics/serving_state.hpp"
#include "suppliers/route_snapshot.hpp"
#include "suppliers/session_registry.hpp"
#include "suppliers/supplier_stats.hpp"

namespace gatewayd::metrics {

class operator_api {
 public:
  struct sources {
    const suppliers::session_registry& sessions;
    const suppliers::route_snapshot_holder& routes;
    const suppliers::supplier_stats& suppliers;
    const serving_state& state;
    std::string version;
  };
  // /connz lists this many suppliers unless ?limit=N says otherwise, and never more than the
  // maximum (limit=0, or any larger N, gets the maximum): an answer stays well under 1 MiB however
  // many connections there are; ?after=ID pages on from a listed connection's id.
  static constexpr std::size_t default_supplier_limit = 100;
  static constexpr std::size_t max_supplier_limit = 1000;

  explicit operator_api(sources s) : s_(std::move(s)) {}

  // Registers the four endpoints; `this` must outlive `server`'s requests.
  void serve_on(metrics_server& server) const;

  metrics_server::response healthz() const;
  metrics_server::response readyz() const;
  metrics_server::response connz(std::string_view query) const;
  metrics_server::response routez() const;

 private:
  sources s_;
};

}  // namespace gatewayd::metrics
