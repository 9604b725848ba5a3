// Supplier sessions paused by a full backpressure consumer: a paused session whose peer left is
// closed (it used to stay, in CLOSE_WAIT, until the consumer resumed it: connect, send one frame,
// close, repeated max_supplier_connections times, locked every supplier out), and a pause holds
// a connection no longer than idle_timeout_ms.
#define BOOST_TEST_MODULE paused_suppliers
#include <boost/test/unit_test.hpp>

#include <string>
#include <thread>

#include "protocol/frame_codec.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"
#include "tools/traffic/payload.hpp"

using namespace gatewayd::test;
using gatewayd::traffic::numbered_payload;
using namespace std::chrono_literals;

namespace {

// 20 MB of frames for the stalled consumer, more than the kernel buffers on its way hold: sent
// until the gateway stops reading (the consumer's queue is full and pauses the supplier).
void fill(test_supplier& s) {
  std::string batch;
  for (int i = 0; i < 20000; ++i)
    batch += gatewayd::protocol::encode_frame("full.x", numbered_payload(1, i, 1000));
  s.send_within(batch, 3s);
}

double connections(const gateway_fixture& gw) {
  return scrape_metric(gw.metrics_port, "gatewayd_supplier_connections");
}

// A backpressure consumer that never reads, full after a few frames, next to a healthy one.
std::string routes(const test_consumer& full, const test_consumer& healthy) {
  return consumer_toml("full", full.endpoint(), "queue_capacity = 2\noverflow = \"backpressure\"") +
         consumer_toml("healthy", healthy.endpoint()) + route_toml("full.>", {"full"}) +
         route_toml("ok.>", {"healthy"});
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_paused_session_whose_peer_left_is_closed) {
  test_consumer full, healthy;
  full.stall(true);
  gateway_fixture gw(routes(full, healthy), "max_supplier_connections = 20");
  BOOST_TEST_REQUIRE(gw.consumers_connected({"full", "healthy"}));
  // Fill the stalled consumer's kernel buffers (20 MB is more than they hold) and its queue,
  // so every later frame for it pauses its supplier. The filler stays connected, paused: a
  // supplier that closes with data still unsent cannot be seen leaving (its FIN waits behind
  // data the gateway does not read); the idle timeout bounds that case (the test below).
  test_supplier filler(gw.supplier_port);
  fill(filler);
  BOOST_TEST_REQUIRE(eventually(
      [&] {
        return scrape_metric(gw.metrics_port, "gatewayd_consumer_queue_depth{consumer=\"full\"}") >=
               2;
      },
      10s));
  // Connect, send one frame to the full consumer, close: three times the connection cap.
  for (int i = 0; i < 60; ++i) {
    test_supplier s(gw.supplier_port);
    s.send_frame("full.x", numbered_payload(2, i, 100));
    std::this_thread::sleep_for(5ms);
  }
  // The burst outruns the cap for a moment (a paused session sees its peer gone within
  // pause_check), but none of them is left holding a place: only the filler stays, and a
  // supplier for the healthy consumer gets in.
  BOOST_TEST(eventually([&] { return connections(gw) == 1; }, 5s), connections(gw)
                                                                       << " sessions still open");
  test_supplier good(gw.supplier_port);
  good.send_frame("ok.x", numbered_payload(3, 0, 100));
  BOOST_TEST(healthy.wait_for_count(1, 5s));
}

BOOST_AUTO_TEST_CASE(a_pause_holds_a_connection_no_longer_than_the_idle_timeout) {
  test_consumer full, healthy;
  full.stall(true);
  gateway_fixture gw(routes(full, healthy), "idle_timeout_ms = 1000");
  BOOST_TEST_REQUIRE(gw.consumers_connected({"full", "healthy"}));
  test_supplier s(gw.supplier_port);
  fill(s);
  // Paused for good (the consumer never reads), and still connected: closed by the timeout.
  BOOST_TEST_REQUIRE(eventually(
      [&] {
        return scrape_metric(gw.metrics_port, "gatewayd_supplier_backpressure_pauses_total") >= 1;
      },
      10s));
  BOOST_TEST(s.closed_by_peer(4s));
  BOOST_TEST(scrape_metric(gw.metrics_port,
                           "gatewayd_supplier_connections_closed_total{reason=\"idle_timeout\"}") >=
             1);
}
