// Exports every gatewayd_* metric by reading the live structures at scrape time: the hot path
// pushes nothing to Prometheus. A consumer a reload removed is exported until the reload after
// it closed.
#pragma once

#include <prometheus/collectable.h>

#include <array>
#include <cstdint>
#include <functional>
#include <string>

#include "consumers/queue_memory.hpp"
#include "metrics/reload_stats.hpp"
#include "net/tls_context.hpp"
#include "runtime/byte_budget.hpp"
#include "runtime/latency_histogram.hpp"
#include "suppliers/route_snapshot.hpp"
#include "suppliers/supplier_stats.hpp"

namespace gatewayd::metrics {

class gateway_collector : public prometheus::Collectable {
 public:
  struct thread_roles {
    unsigned leader = 0, processing = 0, follower = 0;
    std::uint64_t promotions_without_follower = 0;  // the pool was saturated (a counter)
    std::uint64_t leadership_taken_back = 0;        // promotions the old leader ended (a counter)
  };
  struct sources {
    const suppliers::supplier_stats& suppliers;
    const suppliers::route_snapshot_holder& routes;
    const runtime::latency_histogram& promotion_latency;
    const reload_stats& reloads;
    const runtime::byte_budget& budget;
    const consumers::queue_memory& queue_memory;
    std::function<thread_roles()> roles;
    std::string version;
    // The certificates the TLS contexts loaded (empty without [tls]), read at scrape time.
    std::function<std::vector<net::tls_certificate_expiry>()> certificates = {};
    // The CRLs they loaded (`crl`), read at scrape time.
    std::function<std::vector<net::tls_crl_update>()> crls = {};
  };

  explicit gateway_collector(sources s) : s_(std::move(s)) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  // Calls f(const consumers::consumer&) for every consumer of the snapshot and every retired one:
  // consumers a reload removed are exported until the reload after they closed, beside the live
  // ones (route_snapshot::retired), so their drain's outcome, reason="removed", stays visible.
  template <class F>
  void for_each_consumer(F&& f) const {
    const auto snap = s_.routes.load();
    if (!snap) return;
    for (const auto* list : {&snap->consumers, &snap->retired}) {
      for (const auto& c : *list)
        f(*c);
    }
  }
  // The per-consumer families (consumer_families.cpp).
  void collect_consumers(std::vector<prometheus::MetricFamily>& out) const;
  void collect_suppliers(std::vector<prometheus::MetricFamily>& out) const;
  // The supplier leg of confirms: CONFIRM frames confirmed, rejected by reason, pending.
  void collect_confirms(std::vector<prometheus::MetricFamily>& out) const;
  // Both legs' TLS connections by record layer, what ended them abnormally, the supplier
  // listener's handshakes and the certificates' expiry.
  void collect_tls(std::vector<prometheus::MetricFamily>& out) const;
  // The Leader/Followers pool and the gateway-wide byte budget.
  void collect_runtime(std::vector<prometheus::MetricFamily>& out) const;
  // Reloads, the table in use, the build.
  void collect_config(std::vector<prometheus::MetricFamily>& out) const;

  sources s_;
};

}  // namespace gatewayd::metrics
