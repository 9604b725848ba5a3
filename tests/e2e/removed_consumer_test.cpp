// A reload that removes a consumer while frames flow to it: frames routed by the table that
// still named it are its own (every frame is routed by exactly one table version), so it takes
// them while it drains and they reach it; and it stays in /metrics through its drain and after
// it, with its final counts, until the next reload, so whatever it could not deliver is seen.
// Before: the removed consumer refused them at once (lost as reason="removed") and left
// /metrics at once, so that count was never seen.
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <csignal>
#include <string>
#include <thread>

#include "protocol/frame_codec.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"
#include "tools/traffic/traffic_consumer.hpp"
#include "tools/traffic/traffic_supplier.hpp"

using namespace gatewayd::test;
using gatewayd::traffic::traffic_consumer;
using gatewayd::traffic::traffic_supplier;
using namespace std::chrono_literals;

namespace {

double metric(const gateway_fixture& gw, const std::string& series) {
  return scrape_metric(gw.metrics_port, series);
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_consumer_removed_under_traffic_delivers_what_was_routed_to_it) {
  traffic_consumer x(0);
  const std::string with_x =
      consumer_toml("x", x.endpoint(), "overflow = \"backpressure\"") + route_toml("t.0.>", {"x"});
  // The table after the reload names no consumer: what comes after it is unroutable.
  gateway_fixture gw(with_x, "drain_timeout_ms = 5000");
  BOOST_TEST_REQUIRE(gw.consumers_connected({"x"}));
  traffic_supplier s(gw.supplier_port, {.id = 1, .consumers = 1, .payload_size = 128});
  BOOST_TEST_REQUIRE(eventually([&] { return x.tally().frames.load() > 100000; }, 10s));

  gw.dir.write("routes.toml", "");
  gw.daemon->signal(SIGHUP);
  // While it drains, the removed consumer is still exported.
  BOOST_TEST_REQUIRE(eventually(
      [&] { return metric(gw, "gatewayd_config_reloads_total{result=\"success\"}") >= 1; }, 10s));
  BOOST_TEST(metric(gw, "gatewayd_consumer_connected{consumer=\"x\"}") >= 0);
  // Traffic goes on under the new table (unroutable now) before the supplier stops.
  BOOST_TEST(
      eventually([&] { return metric(gw, "gatewayd_messages_unroutable_total") > 1000; }, 10s));
  s.stop();
  const auto sent = s.sent();
  // Every frame is either delivered to x or counted unroutable (routed by the new table);
  // none is refused by x for having been routed by the old one.
  BOOST_TEST(eventually(
                 [&] {
                   return x.tally().frames.load() +
                              metric(gw, "gatewayd_messages_unroutable_total") ==
                          sent;
                 },
                 10s),
             "sent " << sent << ", x got " << x.tally().frames.load() << ", unroutable "
                     << metric(gw, "gatewayd_messages_unroutable_total"));
  BOOST_TEST(x.tally().lost.load() == 0u);
  BOOST_TEST(x.tally().reordered.load() == 0u);
  BOOST_TEST(metric(gw,
                    "gatewayd_consumer_dropped_messages_total{consumer=\"x\",reason="
                    "\"removed\"}") == 0);
  // Drained and closed, it is still shown; the next reload lets it go.
  BOOST_TEST(eventually(
      [&] { return metric(gw, "gatewayd_consumer_connected{consumer=\"x\"}") == 0; }, 10s));
  gw.daemon->signal(SIGHUP);
  BOOST_TEST(eventually(
      [&] { return metric(gw, "gatewayd_consumer_connected{consumer=\"x\"}") == -1; }, 10s));
}

BOOST_AUTO_TEST_CASE(a_removed_consumer_stays_in_metrics_until_its_drain_is_done) {
  test_consumer x;
  x.stall(true);
  gateway_fixture gw(
      consumer_toml("x", x.endpoint(), "queue_capacity = 50000") + route_toml("x.>", {"x"}),
      "drain_timeout_ms = 1500");
  BOOST_TEST_REQUIRE(gw.consumers_connected({"x"}));
  test_supplier s(gw.supplier_port);
  std::string batch;
  for (int i = 0; i < 20000; ++i)
    batch += gatewayd::protocol::encode_frame("x.y", std::string(1000, 'p'));
  BOOST_TEST_REQUIRE(s.send_within(batch, 20s));
  BOOST_TEST_REQUIRE(eventually(
      [&] { return metric(gw, "gatewayd_consumer_queue_depth{consumer=\"x\"}") > 1000; }, 10s));
  gw.dir.write("routes.toml", "");
  gw.daemon->signal(SIGHUP);
  BOOST_TEST_REQUIRE(eventually(
      [&] { return metric(gw, "gatewayd_config_reloads_total{result=\"success\"}") >= 1; }, 10s));
  // Draining (it does not read): still exported, with its queue.
  BOOST_TEST(eventually(
      [&] { return metric(gw, "gatewayd_consumer_queue_depth{consumer=\"x\"}") > 1000; }, 10s));
  // The drain times out: what it held is counted as removed, and shown.
  const std::string removed =
      "gatewayd_consumer_dropped_messages_total{consumer=\"x\",reason=\"removed\"}";
  BOOST_TEST(eventually([&] { return metric(gw, removed) > 1000; }, 10s),
             "removed: " << metric(gw, removed));
  BOOST_TEST(metric(gw, "gatewayd_consumer_queue_depth{consumer=\"x\"}") == 0);
}
