#include <boost/test/unit_test.hpp>

#include "protocol/frame_codec.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"

using namespace gatewayd::test;
using namespace std::chrono_literals;

namespace {

const std::string not_allowed =
    R"(gatewayd_supplier_connections_closed_total{reason="not_allowed"})";

std::string routes_to(const test_consumer& c) {
  return consumer_toml("sink", c.endpoint()) + route_toml("in.>", {"sink"});
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_source_outside_the_allow_list_is_refused_at_accept_and_counted) {
  test_consumer sink;
  gateway_fixture gw(routes_to(sink), "allow = [\"127.0.0.2/32\"]\n");
  BOOST_TEST_REQUIRE(gw.metrics_port != 0);

  for (int i = 0; i < 3; ++i) {
    test_supplier refused(gw.supplier_port, "127.0.0.1");
    refused.send_frame("in.refused", "must never arrive");
    BOOST_TEST(refused.closed_by_peer(10s));
  }
  BOOST_TEST(eventually([&] { return scrape_metric(gw.metrics_port, not_allowed) == 3; }, 10s));
  BOOST_TEST(gw.daemon->wait_for_log("(not_allowed)", 5s).has_value());

  // The allowed source gets through on the same listener.
  test_supplier admitted(gw.supplier_port, "127.0.0.2");
  for (int i = 0; i < 10; ++i)
    admitted.send_frame("in.ok", std::to_string(i));
  BOOST_TEST_REQUIRE(sink.wait_for_count(10, 10s));
  for (const auto& f : sink.frames())
    BOOST_TEST(f.address == "in.ok");
  BOOST_TEST(!admitted.closed_by_peer(200ms));
  BOOST_TEST(scrape_metric(gw.metrics_port, not_allowed) == 3);
}

BOOST_AUTO_TEST_CASE(a_network_block_admits_every_source_inside_it) {
  test_consumer sink;
  gateway_fixture gw(routes_to(sink), "allow = [\"10.0.0.0/8\", \"127.0.0.0/8\"]\n");
  test_supplier a(gw.supplier_port, "127.0.0.1"), b(gw.supplier_port, "127.0.0.2");
  for (int i = 0; i < 5; ++i) {
    a.send_frame("in.a", std::to_string(i));
    b.send_frame("in.b", std::to_string(i));
  }
  BOOST_TEST_REQUIRE(sink.wait_for_count(10, 10s));
  BOOST_TEST(sink.corruptions() == 0u);
  BOOST_TEST(scrape_metric(gw.metrics_port, not_allowed) == 0);
}

// A reload that removes a network closes the open connections from it (counted as
// not_allowed) and refuses new ones; the others keep going; adding it back admits it again.
BOOST_AUTO_TEST_CASE(a_reload_applies_the_allow_list_to_open_and_new_connections) {
  test_consumer sink;
  gateway_fixture gw(routes_to(sink), "allow = [\"127.0.0.2/32\", \"127.0.0.3/32\"]\n");
  test_supplier kept(gw.supplier_port, "127.0.0.2");
  test_supplier removed(gw.supplier_port, "127.0.0.3");
  kept.send_frame("in.kept", "0");
  removed.send_frame("in.removed", "0");
  BOOST_TEST_REQUIRE(sink.wait_for_count(2, 10s));

  BOOST_TEST_REQUIRE(gw.reload_with("allow", "[\"127.0.0.2/32\"]"));
  BOOST_TEST(removed.closed_by_peer(5s));
  BOOST_TEST(eventually([&] { return scrape_metric(gw.metrics_port, not_allowed) == 1; }, 5s));
  BOOST_TEST(gw.daemon->wait_for_log("closing 1 supplier connection(s)", 5s).has_value());
  test_supplier refused(gw.supplier_port, "127.0.0.3");
  BOOST_TEST(refused.closed_by_peer(5s));
  BOOST_TEST(eventually([&] { return scrape_metric(gw.metrics_port, not_allowed) == 2; }, 5s));
  // The connection from the network still listed was not touched.
  kept.send_frame("in.kept", "1");
  BOOST_TEST_REQUIRE(sink.wait_for_count(3, 10s));
  BOOST_TEST(!kept.closed_by_peer(200ms));

  BOOST_TEST_REQUIRE(gw.reload_with("allow", "[\"127.0.0.0/8\"]"));
  test_supplier back(gw.supplier_port, "127.0.0.3");
  back.send_frame("in.back", "2");
  BOOST_TEST_REQUIRE(sink.wait_for_count(4, 10s));
  BOOST_TEST(!back.closed_by_peer(200ms));
  BOOST_TEST(scrape_metric(gw.metrics_port, not_allowed) == 2);
}
