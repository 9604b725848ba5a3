#include <boost/test/unit_test.hpp>

#include <thread>

#include "tests/support/gateway_fixture.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"
#include "tools/traffic/traffic_supplier.hpp"

using namespace gatewayd::test;
using namespace gatewayd::traffic;
using namespace std::chrono_literals;

namespace {

double dropped(unsigned short metrics_port, const std::string& consumer,
               const std::string& reason) {
  std::string s = "gatewayd_consumer_dropped_messages_total{consumer=\"";
  s += consumer;
  s += "\",reason=\"";
  s += reason;
  s += "\"}";
  return scrape_metric(metrics_port, s);
}

double dropped_all_reasons(unsigned short port, const std::string& consumer) {
  double sum = 0;
  for (const char* r :
       {"queue_full", "queue_bytes", "global_bytes", "slow_consumer", "removed", "shutdown"})
    sum += dropped(port, consumer, r);
  return sum;
}

}  // namespace

// Two stalled consumers, each allowed far more than the gateway-wide cap: together they
// would queue 2 x 150 MiB; max_queued_bytes holds the gateway to 16 MiB, the overflow policy
// (drop-oldest) makes room, and every drop is counted as global_bytes.
BOOST_AUTO_TEST_CASE(stalled_consumers_are_held_to_the_global_queued_bytes_cap) {
  test_consumer a, b;
  const std::string generous = "queue_capacity = 1000000\nqueue_bytes = 1073741824";
  constexpr std::uint64_t cap = 16u << 20;
  gateway_fixture gw(consumer_toml("a", a.endpoint(), generous) +
                         consumer_toml("b", b.endpoint(), generous) + route_toml("t.>", {"a", "b"}),
                     "max_queued_bytes = " + std::to_string(cap) + "\n");
  BOOST_TEST_REQUIRE(gw.metrics_port != 0);
  BOOST_TEST_REQUIRE(a.wait_for_connections(1, 10s));
  BOOST_TEST_REQUIRE(b.wait_for_connections(1, 10s));
  a.stall(true);
  b.stall(true);
  const long rss_before = gw.rss_kib();

  constexpr std::uint64_t frames = 150000;  // 1 KiB payloads: 150 MiB for each consumer
  {
    traffic_supplier s(gw.supplier_port, {.id = 0, .consumers = 1, .payload_size = 1024});
    BOOST_TEST_REQUIRE(eventually([&] { return s.sent() >= frames; }, 120s));
    s.stop();
    BOOST_TEST_REQUIRE(eventually(
        [&] {
          return scrape_metric(gw.metrics_port, "gatewayd_supplier_messages_received_total") ==
                 static_cast<double>(s.sent());
        },
        30s));
    const double queued = scrape_metric(gw.metrics_port, "gatewayd_queued_bytes");
    const long peak = gw.peak_rss_kib();
    BOOST_TEST_MESSAGE("sent " << s.sent() << " frames; queued " << queued << " bytes (cap " << cap
                               << "); RSS " << rss_before << " KiB, peak " << peak
                               << " KiB; dropped global_bytes a="
                               << dropped(gw.metrics_port, "a", "global_bytes")
                               << " b=" << dropped(gw.metrics_port, "b", "global_bytes"));
    BOOST_TEST(queued <= static_cast<double>(cap));
    BOOST_TEST(queued >= static_cast<double>(cap) / 2);  // the cap, not a smaller limit, bit
    BOOST_TEST(dropped(gw.metrics_port, "a", "global_bytes") +
                   dropped(gw.metrics_port, "b", "global_bytes") >
               0);
    // Memory: the 16 MiB cap (both consumers share one copy of each frame) plus working set.
    BOOST_TEST(peak - rss_before < 64 * 1024 * memory_slack());

    // Release the consumers: every frame is either delivered whole or counted as dropped.
    a.stall(false);
    b.stall(false);
    for (auto* c : {&a, &b}) {
      const std::string name = c == &a ? "a" : "b";
      BOOST_TEST(eventually(
                     [&] {
                       return static_cast<double>(c->count()) +
                                  dropped_all_reasons(gw.metrics_port, name) ==
                              static_cast<double>(s.sent());
                     },
                     60s),
                 name << ": received " << c->count() << " + dropped "
                      << dropped_all_reasons(gw.metrics_port, name) << " != sent " << s.sent());
      BOOST_TEST(c->corruptions() == 0u);
    }
  }
  BOOST_TEST(eventually(
      [&] { return scrape_metric(gw.metrics_port, "gatewayd_queued_bytes") == 0; }, 30s));
}
