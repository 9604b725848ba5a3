// queue_capacity is the bound a dashboard shows: a consumer that stops reading is held to it
// within slow_consumer_ms, whatever it queued while it still counted as keeping up, for every
// policy but backpressure (issue 22: a drop-newest consumer of capacity 500 showed a depth of
// 2,913 for as long as it was stalled). The real daemon, real sockets, the depth read from the
// real /metrics; once the consumer reads again every frame is accounted for: sent, or dropped
// and counted by reason.
#include <boost/test/unit_test.hpp>

#include <optional>
#include <string>
#include <vector>

#include "protocol/frame_chunk.hpp"
#include "protocol/frame_codec.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"
#include "tools/traffic/payload.hpp"

using namespace gatewayd::test;
using gatewayd::traffic::numbered_payload;
using namespace std::chrono_literals;

namespace {

constexpr double capacity = 500;

// A stalled consumer's closed receive window would end its connection after consumer_timeout_ms
// (30 s; its unread bytes then go with the test consumer's socket): these tests are about the
// queue, however long a loaded machine takes over them, not about liveness.
const std::string stall_tolerated = "consumer_timeout_ms = 600000\n";

double metric(const gateway_fixture& gw, const std::string& series) {
  return scrape_metric(gw.metrics_port, series);
}
double of(const gateway_fixture& gw, const std::string& family, const std::string& consumer) {
  return metric(gw, family + "{consumer=\"" + consumer + "\"}");
}
double dropped(const gateway_fixture& gw, const std::string& consumer, const std::string& reason) {
  return metric(gw, "gatewayd_consumer_dropped_messages_total{consumer=\"" + consumer +
                        "\",reason=\"" + reason + "\"}");
}
double depth(const gateway_fixture& gw, const std::string& consumer) {
  return of(gw, "gatewayd_consumer_queue_depth", consumer);
}
double congested(const gateway_fixture& gw, const std::string& consumer) {
  return of(gw, "gatewayd_consumer_congested", consumer);
}
double sent(const gateway_fixture& gw, const std::string& consumer) {
  return of(gw, "gatewayd_consumer_messages_sent_total", consumer);
}
double received(const gateway_fixture& gw) {
  return metric(gw, "gatewayd_supplier_messages_received_total");
}

// `count` frames to `address`, numbered from `first`, payloads of `size` bytes.
std::string frames(const std::string& address, std::size_t first, std::size_t count,
                   std::size_t size) {
  std::string out;
  for (std::size_t i = first; i < first + count; ++i)
    out += gatewayd::protocol::encode_frame(address, numbered_payload(1, i, size));
  return out;
}

// The numbers of the frames `c` received for `address`, in arrival order.
std::vector<std::uint64_t> seqs(const test_consumer& c, const std::string& address) {
  std::vector<std::uint64_t> out;
  for (const auto& f : c.frames()) {
    if (f.address != address) continue;
    const auto h = gatewayd::traffic::read_header(f.payload);
    BOOST_REQUIRE(h);
    out.push_back(h->sequence);
  }
  return out;
}

// Bounds for the tests below: the grace a stalled consumer gets, and how long after the traffic
// has been read its queue may take to be within its capacity (the grace is counted from the
// stall, which came earlier; the margin is for a loaded machine).
std::chrono::milliseconds held_within(std::chrono::milliseconds grace) {
  return grace + 2s * peer_slowdown();
}

}  // namespace

// The shape: `slow` (capacity 500, drop-newest) stops reading while one supplier bursts
// 50,000 x 256 B to it and to `fast`. Within slow_consumer_ms its depth is at most 500; `fast`
// gets everything; once `slow` reads again it gets exactly the oldest frames, without a gap, and
// what it got plus what was dropped (queue_full) is what was sent to it.
BOOST_AUTO_TEST_CASE(a_stalled_drop_newest_consumer_is_held_to_its_capacity) {
  test_consumer slow, fast;
  slow.stall(true);
  gateway_fixture gw(
      consumer_toml("slow", slow.endpoint(), "queue_capacity = 500\noverflow = \"drop-newest\"") +
          consumer_toml("fast", fast.endpoint()) + route_toml("burst.>", {"slow", "fast"}),
      "slow_consumer_ms = 100\n" + stall_tolerated);
  BOOST_TEST_REQUIRE(gw.consumers_connected({"slow", "fast"}));
  constexpr std::size_t total = 50000;
  test_supplier s(gw.supplier_port);
  BOOST_TEST_REQUIRE(s.send_within(frames("burst.x", 0, total, 256), 30s));
  BOOST_TEST_REQUIRE(eventually([&] { return received(gw) == total; }, 30s));

  double seen = depth(gw, "slow");
  const bool held = eventually(
      [&] {
        seen = depth(gw, "slow");
        return seen >= 0 && seen <= capacity;
      },
      held_within(100ms));
  BOOST_TEST_MESSAGE("slow's queue depth after the burst: " << seen << " (queue_capacity 500)");
  BOOST_TEST(held, "depth " << seen << " > queue_capacity 500");
  BOOST_TEST(congested(gw, "slow") == 1);
  BOOST_TEST(dropped(gw, "slow", "queue_full") > 0);
  BOOST_TEST(fast.wait_for_count(total, 30s));

  // It reads again: what it gets and what was dropped add up to what was routed to it.
  slow.stall(false);
  BOOST_TEST(eventually(
      [&] { return sent(gw, "slow") + dropped(gw, "slow", "queue_full") == total; }, 30s));
  BOOST_TEST(depth(gw, "slow") == 0);
  BOOST_TEST(dropped(gw, "slow", "queue_bytes") == 0);
  BOOST_TEST(slow.wait_for_count(static_cast<std::size_t>(sent(gw, "slow")), 10s));
  const auto got = seqs(slow, "burst.x");
  BOOST_TEST(got.size() == sent(gw, "slow"));
  for (std::size_t i = 0; i < got.size(); ++i)
    BOOST_TEST_REQUIRE(got[i] == i);  // drop-newest: the oldest frames, without a gap
  const auto all = seqs(fast, "burst.x");
  BOOST_TEST_REQUIRE(all.size() == total);
  for (std::size_t i = 0; i < total; ++i)
    BOOST_TEST_REQUIRE(all[i] == i);
  BOOST_TEST(slow.corruptions() == 0u);
  BOOST_TEST(fast.corruptions() == 0u);
}

namespace {

// A consumer that stops reading, fed until its queue is 3x its capacity while it is still in its
// grace, after which nothing more is sent: batches of small frames from a new connection each,
// each batch one read chunk's worth (read whole in one pass, so a pause at the queue's limit holds
// nothing back), each read before the next is sent, so that they queue in their order. Until its
// socket refuses bytes the consumer takes them all (the queue stays short); from then on they
// queue up. A batch of 1,200 makes that two batches after the refusal, well within the grace
// however loaded the machine. (At 200 frames it took eight, and once, on CI, the grace ran out
// before the queue got there; what delayed it went unseen, so an early congestion now fails
// at once and says how far the queue had got, and when.)
struct overshoot {
  static constexpr std::size_t batch = 1200;
  static constexpr std::size_t payload = 32;
  // Two batches take milliseconds, tens of them under the sanitizers: a grace ten times as long
  // there (as peer_slowdown() would give) would only add to the suite's time.
  const std::chrono::milliseconds grace{peer_slowdown() > 1 ? 3000 : 1500};

  test_consumer consumer;
  std::unique_ptr<gateway_fixture> gw;
  std::vector<std::unique_ptr<test_supplier>> suppliers;
  std::size_t total = 0;

  explicit overshoot(const std::string& policy) {
    BOOST_TEST_REQUIRE(frames("x.y", 0, batch, payload).size() <=
                       gatewayd::protocol::frame_chunk::standard_capacity);
    consumer.stall(true);
    gw = std::make_unique<gateway_fixture>(
        consumer_toml("slow", consumer.endpoint(),
                      "queue_capacity = 500\noverflow = \"" + policy + "\"") +
            route_toml("x.>", {"slow"}),
        "slow_consumer_ms = " + std::to_string(grace.count()) + "\n" + stall_tolerated);
    BOOST_TEST_REQUIRE(gw->consumers_connected({"slow"}));
    // The connected gauge goes up just before the link's flow state leaves `disconnected`
    // (which counts as congested: its policy applies).
    BOOST_TEST_REQUIRE(eventually([&] { return congested(*gw, "slow") == 0; }, 5s));
    std::optional<std::chrono::steady_clock::time_point> queuing_since;
    const auto queuing_ms = [&]() -> long long {
      if (!queuing_since) return -1;
      return std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::steady_clock::now() - *queuing_since)
          .count();
    };
    for (double d = 0; d < 3 * capacity; d = depth(*gw, "slow")) {
      if (d > 0 && !queuing_since) queuing_since = std::chrono::steady_clock::now();
      // Its grace ran out before the queue got there: what follows would test nothing.
      BOOST_TEST_REQUIRE(congested(*gw, "slow") == 0,
                         "congested at depth " << d << " after " << total << " frames, "
                                               << queuing_ms()
                                               << " ms after its queue first held frames");
      BOOST_TEST_REQUIRE(total < 2'000'000u, "the consumer's socket never filled up");
      suppliers.push_back(std::make_unique<test_supplier>(gw->supplier_port));
      suppliers.back()->send(frames("x.y", total, batch, payload));
      total += batch;
      BOOST_TEST_REQUIRE(eventually([&] { return received(*gw) == total; }, 10s));
    }
    // All of it read, nothing dropped yet: the consumer still counts as keeping up.
    BOOST_TEST_REQUIRE(congested(*gw, "slow") == 0);
    BOOST_TEST_MESSAGE("queue depth while in its grace: " << depth(*gw, "slow")
                                                          << " (queue_capacity 500) after " << total
                                                          << " frames");
  }

  // True once the depth is at most the capacity; `seen` is the last depth read.
  bool held(double& seen) {
    return eventually(
        [&] {
          seen = depth(*gw, "slow");
          return seen >= 0 && seen <= capacity;
        },
        held_within(grace));
  }
};

}  // namespace

// drop-oldest: the oldest frames go, the newest 500 stay (they arrive last once the consumer
// reads again, after what its socket buffers held), every dropped frame counted as queue_full.
BOOST_AUTO_TEST_CASE(a_stalled_drop_oldest_consumer_keeps_its_newest_frames_within_capacity) {
  overshoot o("drop-oldest");
  auto& gw = *o.gw;
  double seen = 0;
  const bool held = o.held(seen);
  BOOST_TEST_MESSAGE("depth once congested: " << seen);
  BOOST_TEST(held, "depth " << seen << " > queue_capacity 500");
  BOOST_TEST(dropped(gw, "slow", "queue_full") > 0);

  o.consumer.stall(false);
  BOOST_TEST_REQUIRE(eventually(
      [&] { return sent(gw, "slow") + dropped(gw, "slow", "queue_full") == o.total; }, 30s));
  BOOST_TEST_REQUIRE(o.consumer.wait_for_count(static_cast<std::size_t>(sent(gw, "slow")), 10s));
  const auto got = seqs(o.consumer, "x.y");
  BOOST_TEST_REQUIRE(got.size() == sent(gw, "slow"));
  BOOST_TEST_REQUIRE(got.size() >= 500u);
  // What the socket buffers held (the oldest), then the 500 newest, in order.
  for (std::size_t i = 0; i + 500 < got.size(); ++i)
    BOOST_TEST_REQUIRE(got[i] == i);
  for (std::size_t i = 0; i < 500; ++i)
    BOOST_TEST_REQUIRE(got[got.size() - 500 + i] == o.total - 500 + i);
  BOOST_TEST(o.consumer.corruptions() == 0u);
}

// disconnect: a backlog over the limits is discarded (slow_consumer) and the connection
// dropped, as a put that does not fit does; the consumer is dialled again.
BOOST_AUTO_TEST_CASE(a_stalled_disconnect_consumer_over_its_limits_is_dropped) {
  overshoot o("disconnect");
  auto& gw = *o.gw;
  double seen = 0;
  const bool held = o.held(seen);
  BOOST_TEST_MESSAGE("depth once congested: " << seen);
  BOOST_TEST(held, "depth " << seen << " > queue_capacity 500");
  BOOST_TEST(dropped(gw, "slow", "slow_consumer") >= 3 * capacity);
  BOOST_TEST(eventually(
      [&] {
        return metric(gw,
                      "gatewayd_consumer_disconnects_total{consumer=\"slow\",reason=\"slow_"
                      "consumer\"}") == 1;
      },
      5s));
  o.consumer.stall(false);
  BOOST_TEST(o.consumer.wait_for_connections(2, 10s));
  BOOST_TEST(eventually(
      [&] { return sent(gw, "slow") + dropped(gw, "slow", "slow_consumer") == o.total; }, 10s));
  BOOST_TEST(depth(gw, "slow") == 0);
}
