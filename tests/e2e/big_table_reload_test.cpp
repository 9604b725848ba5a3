// A big routing table reloaded again and again keeps the daemon's memory flat (issue 45, item 2):
// 100,000 generated routes, half exact, half wildcard (4.4 MB of TOML), 40 SIGHUP reloads of the
// unchanged file against the real daemon, its RSS read from /proc after each. Before, every
// reload left what it parsed and the table it replaced in the arena of whichever pool thread ran
// it: 101 MB after start, 354-420 MB after 40 reloads. Label perf: it measures memory, which only
// the Release build's allocator tells truly (the sanitizers keep freed memory on purpose).
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <csignal>
#include <string>
#include <vector>

#include "tests/support/gateway_fixture.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"

using namespace gatewayd::test;
using namespace std::chrono_literals;

namespace {

std::string big_table(const test_consumer& c, int routes) {
  std::string t = consumer_toml("c", c.endpoint());
  t.reserve(static_cast<std::size_t>(routes) * 48);
  for (int i = 0; i < routes; ++i) {
    const std::string n = std::to_string(i);
    t += i % 2 == 0 ? route_toml("a" + n + ".b" + std::to_string(i % 97) + ".c", {"c"})
                    : route_toml("w" + n + ".*.>", {"c"});
  }
  return t;
}

}  // namespace

BOOST_AUTO_TEST_CASE(forty_reloads_of_100000_routes_keep_memory_flat) {
  test_consumer c;
  constexpr int routes = 100000, reloads = 40;
  gateway_fixture gw(big_table(c, routes));
  BOOST_TEST_REQUIRE(scrape_metric(gw.metrics_port, "gatewayd_routing_table_routes") == routes);
  const long at_start = gw.rss_kib();
  const std::string done = "gatewayd_config_reloads_total{result=\"success\"}";
  std::vector<long> rss;
  for (int i = 1; i <= reloads; ++i) {
    gw.daemon->signal(SIGHUP);
    BOOST_TEST_REQUIRE(eventually([&] { return scrape_metric(gw.metrics_port, done) >= i; }, 30s),
                       "reload " << i);
    rss.push_back(gw.rss_kib());
  }
  BOOST_TEST(scrape_metric(gw.metrics_port, "gatewayd_routing_table_routes") == routes);
  const long peak = *std::max_element(rss.begin() + 1, rss.end());
  const long early = *std::max_element(rss.begin() + 1, rss.begin() + 10);
  const long late = *std::max_element(rss.end() - 10, rss.end());
  BOOST_TEST_MESSAGE("RSS " << at_start << " KiB after start; after reloads 1, 2, 10, 20, 40: "
                            << rss[0] << ", " << rss[1] << ", " << rss[9] << ", " << rss[19] << ", "
                            << rss[39] << " KiB (peak " << peak << ")");
  // Within twice what the start took, and flat from the second reload on: the last ten reloads
  // peak no higher than reloads 2-10 did, give or take a quarter (the allocator's own slack).
  BOOST_TEST(peak <= 2 * at_start);
  BOOST_TEST(late <= early + early / 4);
}
