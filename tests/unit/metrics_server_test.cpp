// The metrics listener's access list as civetweb gets it, and what civetweb does with it.
#include <boost/test/unit_test.hpp>

#include <asio.hpp>
#include <string>
#include <vector>

#include "metrics/metrics_server.hpp"
#include "net/cidr_block.hpp"
#include "tests/support/http_get.hpp"

using namespace gatewayd;

namespace {

std::vector<net::cidr_block> blocks(const std::vector<std::string>& texts) {
  std::vector<net::cidr_block> out;
  for (const auto& t : texts)
    out.push_back(*net::parse_cidr(t));
  return out;
}

}  // namespace

// Deny first, then each block admitted (civetweb's last match wins); IPv6 blocks bracketed, and
// left out where civetweb has no IPv6 (it would refuse to start on them).
BOOST_AUTO_TEST_CASE(the_access_list_admits_exactly_the_blocks) {
  const auto allow = blocks({"127.0.0.0/8", "::1", "10.1.2.3", "fd00::/8"});
  BOOST_TEST(metrics::civetweb_access_list(allow, true) ==
             "-0.0.0.0/0,+127.0.0.0/8,+[::1]/128,+10.1.2.3/32,+[fd00::]/8");
  BOOST_TEST(metrics::civetweb_access_list(allow, false) == "-0.0.0.0/0,+127.0.0.0/8,+10.1.2.3/32");
  BOOST_TEST(metrics::civetweb_access_list(blocks({"::1"}), false) == "-0.0.0.0/0");
}

// The default allow list holds ::1: civetweb without IPv6 (Debian 12's) must still start on it,
// and an IPv6-only list then admits no IPv4 client rather than every one.
BOOST_AUTO_TEST_CASE(an_ipv6_only_list_starts_and_admits_no_ipv4_client) {
  metrics::metrics_server ipv6_only(net::endpoint{"127.0.0.1", 0}, blocks({"::1"}));
  const auto refused = test::http_get(ipv6_only.port(), "/metrics");
  BOOST_TEST(refused.status == 0);
  metrics::metrics_server loopback(net::endpoint{"127.0.0.1", 0}, blocks({"127.0.0.1", "::1"}));
  BOOST_TEST(test::http_get(loopback.port(), "/metrics").status == 200);
}
