// A queued frame pins the whole read chunk it sits in. A supplier alternating one small frame for
// a stalled consumer with one ~64 KiB frame nobody routes made each small frame pin a chunk of
// its own: ~640 MiB per lagging consumer while gatewayd_consumer_queue_bytes showed ~200 KB.
// What a lagging consumer holds must cost about what its frames take.
#include <boost/test/unit_test.hpp>

#include <string>

#include "protocol/frame_codec.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"
#include "tools/traffic/payload.hpp"

using namespace gatewayd::test;
using gatewayd::traffic::numbered_payload;
using namespace std::chrono_literals;

namespace {

// `gateway_extra`: [gateway] keys; `congested`: whether the stalled consumer is past its grace
// (slow_consumer_ms) while the small frames arrive.
void small_frames_do_not_pin_their_chunks(const std::string& gateway_extra, bool congested) {
  test_consumer stalled;
  stalled.stall(true);
  gateway_fixture gw(consumer_toml("stalled", stalled.endpoint(), "queue_capacity = 100000") +
                         route_toml("small.>", {"stalled"}),
                     gateway_extra);
  BOOST_TEST_REQUIRE(gw.consumers_connected({"stalled"}));
  // First fill the stalled consumer's socket buffers (20 MB is more than they hold), so that
  // what follows stays in its queue.
  test_supplier s(gw.supplier_port);
  std::string batch;
  for (int i = 0; i < 20000; ++i)
    batch += gatewayd::protocol::encode_frame("small.fill", numbered_payload(2, i, 1000));
  BOOST_TEST_REQUIRE(s.send_within(batch, 30s));
  batch.clear();
  BOOST_TEST_REQUIRE(eventually(
      [&] {
        return scrape_metric(gw.metrics_port,
                             "gatewayd_consumer_queue_depth{consumer=\"stalled\"}") > 1000;
      },
      10s));
  const auto is_congested = [&] {
    return scrape_metric(gw.metrics_port, "gatewayd_consumer_congested{consumer=\"stalled\"}") == 1;
  };
  if (congested) BOOST_TEST_REQUIRE(eventually(is_congested, 10s));
  const long rss_before = gw.peak_rss_kib();
  // 6,000 pairs: a 20-byte frame for the stalled consumer, then 64 KiB - 200 bytes for nobody.
  // Each small frame starts a read chunk of its own; held by reference, 6,000 of them would
  // pin 6,000 chunks (375 MiB).
  constexpr int pairs = 6000;
  const std::string junk(64 * 1024 - 200, 'j');
  for (int i = 0; i < pairs; ++i) {
    batch += gatewayd::protocol::encode_frame("small.x", numbered_payload(1, i, 20));
    batch += gatewayd::protocol::encode_frame("nobody.x", junk);
    if (batch.size() > 1024 * 1024) {
      BOOST_TEST_REQUIRE(s.send_within(batch, 30s));
      batch.clear();
    }
  }
  BOOST_TEST_REQUIRE(s.send_within(batch, 30s));
  BOOST_TEST_REQUIRE(eventually(
      [&] {
        return scrape_metric(gw.metrics_port, "gatewayd_supplier_messages_received_total") ==
               20000 + 2 * pairs;
      },
      30s));
  BOOST_TEST(is_congested() == congested);
  // Nothing was dropped: the stalled consumer holds every small frame, in memory about the size
  // of the frames, not of their chunks.
  BOOST_TEST(scrape_metric(gw.metrics_port,
                           "gatewayd_consumer_dropped_messages_total{consumer=\"stalled\",reason="
                           "\"queue_full\"}") == 0);
  // (An instrumented daemon's shadow memory and quarantine: four times the slack.)
  const long slack_kib = 48 * 1024 * memory_slack();
  const long grew = gw.peak_rss_kib() - rss_before;
  BOOST_TEST_MESSAGE("peak RSS grew by " << grew << " KiB for " << pairs << " small frames");
  BOOST_TEST(grew < slack_kib, "peak RSS grew by " << grew << " KiB");
  // And they all arrive, whole and in order, once the consumer reads.
  stalled.stall(false);
  BOOST_TEST(stalled.wait_for_count(20000 + pairs, 30s), "got " << stalled.count());
  BOOST_TEST(stalled.corruptions() == 0u);
}

}  // namespace

BOOST_AUTO_TEST_CASE(small_frames_between_large_unrouted_ones_do_not_pin_their_chunks) {
  small_frames_do_not_pin_their_chunks("", true);
}

// The same within the consumer's grace: its socket refuses bytes but it has not been behind for
// slow_consumer_ms yet. Its queue fills to its own limit without pausing the supplier (at the
// high-water mark the gateway would stop reading here until the grace ends, which with this
// grace is never), nothing is dropped, and what it holds stays about the size of its frames.
BOOST_AUTO_TEST_CASE(nor_do_they_in_the_consumers_grace) {
  small_frames_do_not_pin_their_chunks("slow_consumer_ms = 600000\n", false);
}
