// proxy_protocol in the real daemon: connections from proxy_from (here 127.0.0.2, the
// "balancer") start with a PROXY v2 header that names the supplier for `allow`, /connz and the
// log; everyone else is a plain supplier; a missing, late or malformed header closes the
// connection and is counted.
#include <boost/test/unit_test.hpp>

#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "protocol/frame_codec.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/http_get.hpp"
#include "tests/support/proxy_v2.hpp"
#include "tests/support/raw_suppliers.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"

using namespace gatewayd::test;
using gatewayd::protocol::encode_frame;
using namespace std::chrono_literals;

namespace {

const std::string balancer = "127.0.0.2";
const std::string gateway_toml =
    "proxy_protocol = true\nproxy_from = [\"127.0.0.2/32\"]\n"
    "allow = [\"192.0.2.0/24\", \"2001:db8::/32\", \"127.0.0.0/8\"]\n";

double closed(const gateway_fixture& gw, const std::string& reason) {
  return scrape_metric(gw.metrics_port,
                       "gatewayd_supplier_connections_closed_total{reason=\"" + reason + "\"}");
}

std::set<std::string> connz_peers(const gateway_fixture& gw) {
  std::set<std::string> peers;
  const auto connz = nlohmann::json::parse(http_get(gw.metrics_port, "/connz").body);
  for (const auto& c : connz["suppliers"]["connections"])
    peers.insert(c["peer"].get<std::string>());
  return peers;
}

std::string local_endpoint(test_supplier& s) {
  const auto ep = s.socket().local_endpoint();
  return ep.address().to_string() + ":" + std::to_string(ep.port());
}

struct fixture {
  test_consumer sink;
  gateway_fixture gw{consumer_toml("sink", sink.endpoint()) + route_toml("in.>", {"sink"}),
                     gateway_toml};
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(the_header_names_the_supplier_behind_the_balancer, fixture) {
  BOOST_TEST_REQUIRE(sink.wait_for_connections(1, 5s));
  // Header and first frames in one write: the gateway must take exactly the header's bytes.
  test_supplier v4(gw.supplier_port, balancer);
  v4.send(proxy_v2("192.0.2.7", 4567) + encode_frame("in.v4", "0") + encode_frame("in.v4", "1"));
  // A header written in pieces, the frames after a pause.
  test_supplier v6(gw.supplier_port, balancer);
  const std::string header = proxy_v2("2001:db8::1", 80);
  v6.send(header.substr(0, 5));
  std::this_thread::sleep_for(50ms);
  v6.send(header.substr(5, 20));
  std::this_thread::sleep_for(50ms);
  v6.send(header.substr(25));
  v6.send(encode_frame("in.v6", "0"));
  // A health check's LOCAL header: the balancer's own address stands.
  test_supplier local(gw.supplier_port, balancer);
  local.send(proxy_v2_local() + encode_frame("in.local", "0"));
  BOOST_TEST_REQUIRE(sink.wait_for_count(4, 5s));
  BOOST_TEST(sink.corruptions() == 0u);
  std::multiset<std::string> got;
  for (const auto& f : sink.frames())
    got.insert(f.address + "|" + f.payload);
  BOOST_TEST((got == std::multiset<std::string>{"in.v4|0", "in.v4|1", "in.v6|0", "in.local|0"}));

  const auto peers = connz_peers(gw);
  BOOST_TEST(peers.count("192.0.2.7:4567") == 1u);
  BOOST_TEST(peers.count("[2001:db8::1]:80") == 1u);
  BOOST_TEST(peers.count(local_endpoint(local)) == 1u);
  BOOST_TEST(peers.size() == 3u);
  BOOST_TEST(closed(gw, "proxy_header") == 0);
}

BOOST_FIXTURE_TEST_CASE(allow_applies_to_the_supplier_and_others_stay_plain, fixture) {
  BOOST_TEST_REQUIRE(sink.wait_for_connections(1, 5s));
  // The balancer is trusted, the supplier it names is not allowed.
  test_supplier outsider(gw.supplier_port, balancer);
  outsider.send(proxy_v2("198.51.100.9", 1234) + encode_frame("in.outsider", "x"));
  BOOST_TEST(outsider.closed_by_peer(5s));
  BOOST_TEST(eventually([&] { return closed(gw, "not_allowed") == 1; }, 5s));
  BOOST_TEST(gw.daemon->wait_for_log("refused supplier 198.51.100.9:1234", 5s).has_value(),
             gw.daemon->log());

  // Not a balancer: a plain supplier, whose own address counts...
  test_supplier direct(gw.supplier_port, "127.0.0.1");
  direct.send_frame("in.direct", "y");
  BOOST_TEST_REQUIRE(sink.wait_for_count(1, 5s));
  BOOST_TEST(connz_peers(gw).count(local_endpoint(direct)) == 1u);
  // ...and which cannot claim another address: its header is not GWP/1.
  test_supplier spoofer(gw.supplier_port, "127.0.0.1");
  spoofer.send(proxy_v2("192.0.2.8", 1) + encode_frame("in.spoofed", "z"));
  BOOST_TEST(spoofer.closed_by_peer(5s));
  BOOST_TEST(eventually(
      [&] {
        return scrape_metric(gw.metrics_port,
                             "gatewayd_supplier_protocol_errors_total{reason=\"bad_magic\"}") == 1;
      },
      5s));
  BOOST_TEST(sink.count() == 1u);
  BOOST_TEST(closed(gw, "proxy_header") == 0);
}

BOOST_FIXTURE_TEST_CASE(a_missing_malformed_or_late_header_closes_and_is_counted, fixture) {
  BOOST_TEST_REQUIRE(sink.wait_for_connections(1, 5s));
  // Frames straight from the balancer, no header.
  test_supplier bare(gw.supplier_port, balancer);
  bare.send(encode_frame("in.bare", "0123456789"));
  BOOST_TEST(bare.closed_by_peer(5s));
  // A version 1 header (text) is not accepted.
  test_supplier v1(gw.supplier_port, balancer);
  v1.send("PROXY TCP4 192.0.2.7 127.0.0.1 4567 7400\r\n");
  BOOST_TEST(v1.closed_by_peer(5s));
  BOOST_TEST(eventually([&] { return closed(gw, "proxy_header") == 2; }, 5s));
  // Nothing at all: the deadline (5 s) closes it.
  const auto start = std::chrono::steady_clock::now();
  test_supplier silent(gw.supplier_port, balancer);
  BOOST_TEST(silent.closed_by_peer(10s));
  BOOST_TEST(std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::steady_clock::now() - start)
                 .count() >= 4500);
  BOOST_TEST(eventually([&] { return closed(gw, "proxy_header") == 3; }, 5s));
  BOOST_TEST(gw.daemon->wait_for_log("no PROXY header in time", 1s).has_value(), gw.daemon->log());
  BOOST_TEST(sink.count() == 0u);
  BOOST_TEST(scrape_metric(gw.metrics_port, "gatewayd_supplier_connections") == 0);
}

// A reload that removes the network of a supplier behind the balancer closes that supplier's
// connection, although the balancer's own address is still allowed: the check is on the
// address the header named.
BOOST_FIXTURE_TEST_CASE(a_reloaded_allow_list_closes_the_supplier_not_the_balancer, fixture) {
  BOOST_TEST_REQUIRE(sink.wait_for_connections(1, 5s));
  test_supplier behind(gw.supplier_port, balancer);
  behind.send(proxy_v2("192.0.2.7", 4567) + encode_frame("in.behind", "0"));
  test_supplier other(gw.supplier_port, balancer);
  other.send(proxy_v2("2001:db8::1", 80) + encode_frame("in.other", "0"));
  BOOST_TEST_REQUIRE(sink.wait_for_count(2, 5s));

  BOOST_TEST_REQUIRE(gw.reload_with("allow", R"(["2001:db8::/32", "127.0.0.0/8"])"));
  BOOST_TEST(behind.closed_by_peer(5s));
  BOOST_TEST(eventually([&] { return closed(gw, "not_allowed") == 1; }, 5s));
  other.send(encode_frame("in.other", "1"));
  BOOST_TEST_REQUIRE(sink.wait_for_count(3, 5s));
  BOOST_TEST(!other.closed_by_peer(200ms));
  BOOST_TEST(connz_peers(gw) == std::set<std::string>{"[2001:db8::1]:80"});
}

// Issue 29 point 4, the PROXY variant: balancer connections waiting for their header counted
// against max_supplier_connections, so 25 that never send one (cap 20) refused a real supplier
// until the header deadline (5 s) ended them. A connection without its header holds no place now.
BOOST_AUTO_TEST_CASE(silent_balancer_connections_never_keep_a_supplier_out) {
  test_consumer sink;
  gateway_fixture gw(consumer_toml("sink", sink.endpoint()) + route_toml("in.>", {"sink"}),
                     gateway_toml + "max_supplier_connections = 20\n");
  BOOST_TEST_REQUIRE(sink.wait_for_connections(1, 5s));
  std::vector<std::unique_ptr<test_supplier>> silent;
  for (int i = 0; i < 25; ++i)
    silent.push_back(std::make_unique<test_supplier>(gw.supplier_port, balancer));
  const auto t0 = std::chrono::steady_clock::now();
  bool delivered = false;
  while (!delivered && std::chrono::steady_clock::now() - t0 < 2s) {
    test_supplier s(gw.supplier_port, balancer);
    delivered = s.send_within(proxy_v2("192.0.2.7", 4567) + encode_frame("in.through", "0"), 1s) &&
                sink.wait_for_count(1, 300ms);
  }
  BOOST_TEST_MESSAGE(
      "a supplier behind 25 balancer connections without a header (cap 20): "
      << (delivered ? "through in " +
                          std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                             std::chrono::steady_clock::now() - t0)
                                             .count()) +
                          " ms"
                    : std::string("not within 2 s"))
      << "; refused: " << closed(gw, "connection_limit"));
  BOOST_TEST(delivered);
  BOOST_TEST(closed(gw, "connection_limit") == 0);
}
