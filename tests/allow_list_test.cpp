#define BOOST_TEST_MODULE allow_list
#include <boost/test/unit_test.hpp>

#include <poll.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

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

namespace {

// Rewrites the fixture's gatewayd.toml with another allow list and reloads it.
void reload_allow(gateway_fixture& gw, const std::string& allow, int nth) {
  std::ifstream in(gw.config_path());
  std::stringstream text;
  text << in.rdbuf();
  const std::string old = text.str();
  const auto at = old.find("allow = ");
  BOOST_TEST_REQUIRE(at != std::string::npos);
  const auto end = old.find('\n', at);
  const std::string edited = old.substr(0, at) + "allow = " + allow + old.substr(end);
  gw.dir.write("gatewayd.toml.new", edited);
  std::filesystem::rename(gw.dir.path() / "gatewayd.toml.new", gw.config_path());
  gw.daemon->signal(SIGHUP);
  const std::string reloaded = R"(gatewayd_config_reloads_total{result="success"})";
  BOOST_TEST_REQUIRE(
      eventually([&] { return scrape_metric(gw.metrics_port, reloaded) >= nth; }, 10s));
}

}  // namespace

// A reload that removes a network closes the open connections from it (counted as
// not_allowed) and refuses new ones; the others keep going; adding it back admits it again.
BOOST_AUTO_TEST_CASE(a_reload_applies_the_allow_list_to_open_and_new_connections) {
  test_consumer sink;
  gateway_fixture gw(routes_to(sink), "allow = [\"127.0.0.2/32\", \"127.0.0.3/32\"]\n");
  bound_supplier kept("127.0.0.2", gw.supplier_port);
  bound_supplier removed("127.0.0.3", gw.supplier_port);
  kept.send_frame("in.kept", "0");
  removed.send_frame("in.removed", "0");
  BOOST_TEST_REQUIRE(sink.wait_for_count(2, 10s));

  reload_allow(gw, "[\"127.0.0.2/32\"]", 1);
  BOOST_TEST(removed.closed_by_peer(5s));
  BOOST_TEST(eventually([&] { return scrape_metric(gw.metrics_port, not_allowed) == 1; }, 5s));
  BOOST_TEST(gw.daemon->wait_for_log("closing 1 supplier connection(s)", 5s).has_value());
  bound_supplier refused("127.0.0.3", gw.supplier_port);
  BOOST_TEST(refused.closed_by_peer(5s));
  BOOST_TEST(eventually([&] { return scrape_metric(gw.metrics_port, not_allowed) == 2; }, 5s));
  // The connection from the network still listed was not touched.
  kept.send_frame("in.kept", "1");
  BOOST_TEST_REQUIRE(sink.wait_for_count(3, 10s));
  BOOST_TEST(!kept.closed_by_peer(200ms));

  reload_allow(gw, "[\"127.0.0.0/8\"]", 2);
  bound_supplier back("127.0.0.3", gw.supplier_port);
  back.send_frame("in.back", "2");
  BOOST_TEST_REQUIRE(sink.wait_for_count(4, 10s));
  BOOST_TEST(!back.closed_by_peer(200ms));
  BOOST_TEST(scrape_metric(gw.metrics_port, not_allowed) == 2);
}
