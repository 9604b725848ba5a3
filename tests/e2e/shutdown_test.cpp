// Stopping the real daemon: a stop ends within drain_timeout_ms plus a small bound, always, and
// delivers what a consumer that comes back takes; a second SIGTERM during the drain ends it at
// once.
#include <boost/test/unit_test.hpp>

#include <csignal>
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

const std::string reloads = "gatewayd_config_reloads_total{result=\"success\"}";

// `frames` frames of 1 KB for "s.x", written in large batches.
void send_frames(unsigned short port, int frames) {
  test_supplier s(port);
  std::string batch;
  for (int i = 0; i < frames; ++i) {
    batch += gatewayd::protocol::encode_frame("s.x", numbered_payload(1, i, 1000));
    if (batch.size() > 256 * 1024) {
      s.send(batch);
      batch.clear();
    }
  }
  s.send(batch);
}

double queued(const gateway_fixture& gw) {
  return scrape_metric(gw.metrics_port, "gatewayd_consumer_queue_depth{consumer=\"a\"}");
}

}  // namespace

// An outside check hung here one run in six: gatewayd logged "received SIGTERM; shutting down"
// and then nothing for 30 s, with drain_timeout_ms at its default 5000.
BOOST_AUTO_TEST_CASE(a_stalled_consumer_resuming_after_sigterm_is_drained_within_the_bound) {
  constexpr int frames = 20000;
  for (int round = 0; round < 4; ++round) {
    BOOST_TEST_CONTEXT("round " << round) {
      test_consumer a;
      a.stall(true);
      gateway_fixture gw(consumer_toml("a", a.endpoint()) + route_toml("s.>", {"a"}));
      BOOST_TEST_REQUIRE(a.wait_for_connections(1, 5s));
      // The queue is raised by a reload just before the load, as in the check.
      gw.dir.write("routes.toml", consumer_toml("a", a.endpoint(), "queue_capacity = 50000") +
                                      route_toml("s.>", {"a"}));
      gw.daemon->signal(SIGHUP);
      BOOST_TEST_REQUIRE(
          eventually([&] { return scrape_metric(gw.metrics_port, reloads) >= 1; }, 10s));
      send_frames(gw.supplier_port, frames);
      // All 20,000 read: a stop reads nothing more, so what a supplier's socket still holds
      // is not the gateway's to deliver.
      const auto received = [&] {
        return scrape_metric(gw.metrics_port, "gatewayd_supplier_messages_received_total");
      };
      BOOST_TEST_REQUIRE(eventually([&] { return received() == frames; }, 10s),
                         "received " << received() << "\n"
                                     << gw.daemon->log());
      BOOST_TEST_REQUIRE(queued(gw) > frames / 2, "queued " << queued(gw));

      gw.daemon->signal(SIGTERM);
      // The consumer resumes once the daemon is stopping, as in the check.
      BOOST_TEST_REQUIRE(gw.daemon->wait_for_log("shutting down", 5s).has_value());
      a.stall(false);
      // drain_timeout_ms (5 s) plus a small bound: here everything drains long before.
      const auto code = gw.daemon->wait_exit(7s);
      BOOST_TEST_REQUIRE(code.has_value(), "still running after 7 s:\n" << gw.daemon->log());
      BOOST_TEST(*code == 0);
      BOOST_TEST(a.wait_for_count(frames, 5s), "got " << a.count() << "\n" << gw.daemon->log());
      BOOST_TEST(a.corruptions() == 0u);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_second_sigterm_ends_the_drain_at_once) {
  test_consumer a;
  a.stall(true);
  gateway_fixture gw(
      consumer_toml("a", a.endpoint(), "queue_capacity = 50000") + route_toml("s.>", {"a"}),
      "drain_timeout_ms = 30000");
  BOOST_TEST_REQUIRE(a.wait_for_connections(1, 5s));
  send_frames(gw.supplier_port, 20000);
  BOOST_TEST_REQUIRE(eventually([&] { return queued(gw) > 10000; }, 10s), "queued "
                                                                              << queued(gw) << "\n"
                                                                              << gw.daemon->log());
  gw.daemon->signal(SIGTERM);
  BOOST_TEST_REQUIRE(gw.daemon->wait_for_log("shutting down", 5s).has_value());
  // Not synchronisation: the drain going on while nothing is read is what is observed.
  std::this_thread::sleep_for(300ms);
  BOOST_TEST(gw.daemon->running());  // draining: the consumer still does not read
  gw.daemon->signal(SIGTERM);
  // The drain would last drain_timeout_ms (30 s): an exit within 3 s is the second SIGTERM's.
  const auto code = gw.daemon->wait_exit(3s);
  BOOST_TEST_REQUIRE(code.has_value(), "the second SIGTERM did not end the drain:\n"
                                           << gw.daemon->log());
  // What was left is still named and counted.
  BOOST_TEST(gw.daemon->count_in_log("frames undelivered at shutdown") >= 1u, gw.daemon->log());
}

// With nothing queued a stop is quick. civetweb's listener poll (2 s) once added up to 2 s to
// every stop with metrics on: stopped shortly after start, when that poll has almost all of
// its 2 s left, the daemon must still be gone in well under those 2 s.
BOOST_AUTO_TEST_CASE(an_idle_gateway_stops_at_once_with_metrics_on) {
  test_consumer a;
  gateway_fixture gw(consumer_toml("a", a.endpoint()) + route_toml("s.>", {"a"}));
  BOOST_TEST_REQUIRE(gw.metrics_port != 0);
  BOOST_TEST_REQUIRE(a.wait_for_connections(1, 5s));
  const auto t0 = std::chrono::steady_clock::now();
  gw.daemon->signal(SIGTERM);
  const auto code = gw.daemon->wait_exit(5s);
  const auto took = std::chrono::steady_clock::now() - t0;
  BOOST_TEST_REQUIRE(code.has_value());
  BOOST_TEST(*code == 0);
  BOOST_TEST(
      (took < 1200ms),
      "stop took " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
}
