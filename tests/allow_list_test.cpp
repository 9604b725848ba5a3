#define BOOST_TEST_MODULE allow_list
#include <boost/test/unit_test.hpp>

#include <poll.h>

#include "protocol/frame_codec.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"

using namespace gatewayd::test;
using namespace std::chrono_literals;

namespace {

const std::string not_allowed =
    R"(gatewayd_supplier_connections_closed_total{reason="not_allowed"})";

// A supplier connecting from `source` (a loopback address other than 127.0.0.1 is a real,
// distinct source once the socket is bound to it before connect).
struct bound_supplier {
  asio::io_context ioc;
  asio::ip::tcp::socket socket{ioc};
  bound_supplier(const std::string& source, unsigned short port) {
    socket.open(asio::ip::tcp::v4());
    socket.bind({asio::ip::make_address(source), 0});
    socket.connect({asio::ip::make_address("127.0.0.1"), port});
  }
  void send_frame(const std::string& address, const std::string& payload) {
    asio::write(socket, asio::buffer(gatewayd::protocol::encode_frame(address, payload)));
  }
  // True once the gateway closed the connection: EOF or reset within `timeout`.
  bool closed_by_peer(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char sink[256];
    while (std::chrono::steady_clock::now() < deadline) {
      if (socket.available() == 0) {
        pollfd p{socket.native_handle(), POLLIN, 0};
        if (::poll(&p, 1, 20) <= 0) continue;
      }
      std::error_code ec;
      socket.read_some(asio::buffer(sink), ec);
      if (ec) return true;
    }
    return false;
  }
};

std::string routes_to(const test_consumer& c) {
  return consumer_toml("sink", c.endpoint()) + route_toml("in.>", {"sink"});
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_source_outside_the_allow_list_is_refused_at_accept_and_counted) {
  test_consumer sink;
  gateway_fixture gw(routes_to(sink), "allow = [\"127.0.0.2/32\"]\n");
  BOOST_TEST_REQUIRE(gw.metrics_port != 0);

  for (int i = 0; i < 3; ++i) {
    bound_supplier refused("127.0.0.1", gw.supplier_port);
    refused.send_frame("in.refused", "must never arrive");
    BOOST_TEST(refused.closed_by_peer(10s));
  }
  BOOST_TEST(eventually([&] { return scrape_metric(gw.metrics_port, not_allowed) == 3; }, 10s));
  BOOST_TEST(gw.daemon->wait_for_log("(not_allowed)", 5s).has_value());

  // The allowed source gets through on the same listener.
  bound_supplier admitted("127.0.0.2", gw.supplier_port);
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
  bound_supplier a("127.0.0.1", gw.supplier_port), b("127.0.0.2", gw.supplier_port);
  for (int i = 0; i < 5; ++i) {
    a.send_frame("in.a", std::to_string(i));
    b.send_frame("in.b", std::to_string(i));
  }
  BOOST_TEST_REQUIRE(sink.wait_for_count(10, 10s));
  BOOST_TEST(sink.corruptions() == 0u);
  BOOST_TEST(scrape_metric(gw.metrics_port, not_allowed) == 0);
}
