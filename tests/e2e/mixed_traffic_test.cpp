// The shape users send: 4 suppliers, each frame addressed to the next of 4 consumers in turn,
// at full speed, into consumers with a drop policy and small queues that read as fast as data
// comes. A gateway whose threads read faster than they write fills those queues and drops
// (before the data-path rework: 99 % of frames); this one must deliver every frame, in
// per-supplier order, and count no drop, whether idle threads sleep at once or poll first
// (idle_poll_us).
// GCC 12 warns falsely (-Wrestrict, GCC bug 105329) inside the std::string concatenation with
// which Boost names each sample of a data-driven case.
#pragma GCC diagnostic ignored "-Wrestrict"
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/gateway_fixture.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"
#include "tools/traffic/traffic_consumer.hpp"
#include "tools/traffic/traffic_supplier.hpp"

using namespace gatewayd::test;
using gatewayd::traffic::traffic_consumer;
using gatewayd::traffic::traffic_supplier;
using namespace std::chrono_literals;
namespace data = boost::unit_test::data;

namespace {

// The [gateway] keys each case runs under: the defaults, and idle threads polling first.
const std::vector<std::string> settings = {"", "idle_poll_us = 50\n"};
constexpr unsigned n = 4;  // consumers

// `supplier_count` suppliers at full speed, each frame to the next consumer in turn.
void run_mixed(const std::string& keys, unsigned supplier_count) {
  std::array<std::unique_ptr<traffic_consumer>, n> consumers;
  std::string routes;
  std::vector<std::string> names;
  for (unsigned c = 0; c < n; ++c) {
    consumers[c] = std::make_unique<traffic_consumer>(c);
    names.push_back("c" + std::to_string(c));
    // The default policy (drop-oldest) with a queue far smaller than what flows through.
    routes += consumer_toml(names.back(), consumers[c]->endpoint(), "queue_capacity = 2000") +
              route_toml("t." + std::to_string(c) + ".>", {names.back()});
  }
  // The receivers here are threads of this test, on the same two cores as the gateway and the
  // suppliers (and slowed by sanitizers): they may be off the CPU for a while, which is not
  // what this test is about, so they get two seconds to catch up before counting as slow.
  gateway_fixture gw(routes, keys + "slow_consumer_ms = 2000\n");
  BOOST_TEST_REQUIRE(gw.consumers_connected(names));

  std::vector<std::unique_ptr<traffic_supplier>> suppliers;
  for (unsigned s = 0; s < supplier_count; ++s) {
    suppliers.push_back(std::make_unique<traffic_supplier>(
        gw.supplier_port,
        traffic_supplier::options{
            .id = static_cast<unsigned>(s), .consumers = n, .payload_size = 128, .batch = 64}));
  }
  std::this_thread::sleep_for(1500ms);
  std::uint64_t sent = 0;
  for (auto& s : suppliers) {
    s->stop();
    sent += s->sent();
  }
  BOOST_TEST_MESSAGE("[" << keys << "]: " << sent << " frames sent");
  BOOST_TEST_REQUIRE(sent > 10000u);  // the load really ran

  const auto delivered = [&] {
    std::uint64_t total = 0;
    for (const auto& c : consumers)
      total += c->tally().frames.load();
    return total;
  };
  BOOST_TEST(eventually([&] { return delivered() == sent; }, 60s),
             delivered() << " of " << sent << " delivered");
  BOOST_TEST(scrape_metric(gw.metrics_port, "gatewayd_supplier_messages_received_total") == sent);
  double dropped = 0;
  for (const auto& name : names) {
    for (const char* reason : {"queue_full", "queue_bytes", "global_bytes", "slow_consumer"}) {
      dropped +=
          scrape_metric(gw.metrics_port, "gatewayd_consumer_dropped_messages_total{consumer=\"" +
                                             name + "\",reason=\"" + reason + "\"}");
    }
  }
  BOOST_TEST(dropped == 0);
  for (unsigned c = 0; c < n; ++c) {
    BOOST_TEST_CONTEXT("consumer c" << c) {
      std::uint64_t for_c = 0;
      for (const auto& s : suppliers)
        for_c += s->sent_to(c);
      const auto& t = consumers[c]->tally();
      BOOST_TEST(t.frames.load() == for_c);
      BOOST_TEST(t.lost.load() == 0u);
      BOOST_TEST(t.reordered.load() == 0u);
      BOOST_TEST(t.duplicated.load() == 0u);
      BOOST_TEST(t.misrouted.load() == 0u);
      BOOST_TEST(t.corrupt.load() == 0u);
      BOOST_TEST(t.connections.load() == 1u);  // no disconnect policy, no redial
    }
  }
}

}  // namespace

BOOST_DATA_TEST_CASE(mixed_addresses_at_full_speed_lose_nothing, data::make(settings), keys) {
  run_mixed(keys, 4);
}

// One connection feeding four consumers: its reads are the gateway's busiest handler, whose
// writes go to another thread while it reads on (frame_router::flush); still every frame, in
// order, nothing dropped.
BOOST_DATA_TEST_CASE(one_supplier_alternating_over_four_consumers_loses_nothing,
                     data::make(settings), keys) {
  run_mixed(keys, 1);
}
