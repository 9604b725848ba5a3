// CONFIRM frames over the supplier listener's TLS, against the real daemon: the replies go back
// through the connection's channel, and a TLS supplier that never reads them is closed as slow.
#include <boost/test/unit_test.hpp>

#include <map>
#include <string>
#include <vector>

#include "protocol/control_message.hpp"
#include "protocol/frame_codec.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/raw_tls_client.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"
#include "tests/support/tls_peers.hpp"

using namespace gatewayd;
using namespace gatewayd::test;
using namespace std::chrono_literals;
using protocol::control_message;

namespace {

std::string confirm_frames(const std::string& address, int n) {
  std::string bytes;
  for (int i = 0; i < n; ++i)
    bytes += protocol::encode_frame(address, "p", protocol::frame_flags::confirm);
  return bytes;
}

// Reads control messages until a confirm of at least `n` came; every one checked as it comes.
bool read_confirms(raw_tls_client& c, std::uint64_t n, std::vector<control_message>& got) {
  std::string in;
  for (;;) {
    if (!got.empty() && got.back().what == control_message::kind::confirm && got.back().number >= n)
      return true;
    if (!c.read_some(in)) return false;
    std::size_t at = 0;
    for (;;) {
      const auto r =
          protocol::parse_frame(std::string_view(in).substr(at), 1024, protocol::control_frames);
      if (r.state == protocol::parse_result::status::need_more) break;
      if (r.state == protocol::parse_result::status::error) return false;
      const auto m = protocol::parse_control(r.frame);
      if (!m.message) return false;
      got.push_back(*m.message);
      at += r.frame.bytes.size();
    }
    in.erase(0, at);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(confirms_and_rejects_go_back_through_tls) {
  pki p;
  test_consumer sink;
  gateway_fixture gw(consumer_toml("sink", sink.endpoint()) + route_toml("fan.>", {"sink"}), "", {},
                     true, p.tls_table(false));
  BOOST_TEST_REQUIRE(gw.consumers_connected({"sink"}));
  raw_tls_client c(p, "");
  BOOST_TEST_REQUIRE(c.connect(gw.supplier_port));
  BOOST_TEST_REQUIRE(c.write(confirm_frames("fan.x", 500) + confirm_frames("nowhere", 3) +
                             confirm_frames("fan.x", 500)));
  std::vector<control_message> got;
  BOOST_TEST_REQUIRE(read_confirms(c, 1003, got));
  std::uint64_t last = 0;
  std::map<std::uint64_t, protocol::reject_reason> rejects;
  for (const auto& m : got) {
    if (m.what == control_message::kind::confirm) {
      BOOST_TEST(m.number >= last);
      last = m.number;
    } else {
      BOOST_TEST(m.number > last);
      BOOST_TEST(rejects.count(m.number) == 0u);
      rejects[m.number] = m.reason;
    }
  }
  BOOST_TEST(last == 1003u);
  BOOST_TEST((rejects == std::map<std::uint64_t, protocol::reject_reason>{
                             {501, protocol::reject_reason::unroutable},
                             {502, protocol::reject_reason::unroutable},
                             {503, protocol::reject_reason::unroutable}}));
  BOOST_TEST_REQUIRE(sink.wait_for_count(1000, 20s));
  BOOST_TEST(sink.corruptions() == 0u);
}

BOOST_AUTO_TEST_CASE(a_tls_supplier_that_leaves_its_confirms_unread_is_closed_as_slow) {
  pki p;
  test_consumer sink;
  gateway_fixture gw(consumer_toml("sink", sink.endpoint()) + route_toml("fan.>", {"sink"}),
                     "confirm_timeout_ms = 500\nmax_unconfirmed_frames = 1000\n", {}, true,
                     p.tls_table(false));
  BOOST_TEST_REQUIRE(gw.consumers_connected({"sink"}));
  raw_tls_client deaf(p, "");
  deaf.small_receive_buffer();
  BOOST_TEST_REQUIRE(deaf.connect(gw.supplier_port));
  const std::string burst = confirm_frames("n", 1000);
  const std::string closed =
      R"(gatewayd_supplier_connections_closed_total{reason="confirms_unread"})";
  // Writes until the gateway stops reading (the write then fails or blocks up to the socket's
  // send timeout) or has closed the connection.
  BOOST_TEST_REQUIRE(eventually(
      [&] {
        deaf.write(burst);
        return scrape_metric(gw.metrics_port, closed) == 1;
      },
      60s));
  BOOST_TEST(deaf.closed_within(10s));
  raw_tls_client other(p, "");
  BOOST_TEST_REQUIRE(other.connect(gw.supplier_port));
  BOOST_TEST_REQUIRE(other.write(protocol::encode_frame("fan.x", "still flowing")));
  BOOST_TEST(sink.wait_for_count(1, 20s));
}
