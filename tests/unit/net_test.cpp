#include <boost/test/unit_test.hpp>

#include <array>
#include <asio.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "net/cidr_block.hpp"
#include "net/endpoint.hpp"
#include "net/kernel_tls_probe.hpp"
#include "net/tcp_liveness.hpp"
#include "net/tls_channel.hpp"
#include "tests/support/wait_until.hpp"

using namespace gatewayd::net;

namespace {

std::array<std::uint8_t, 4> v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
  return {a, b, c, d};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(endpoints)

BOOST_AUTO_TEST_CASE(parses_ipv4_and_ipv6_literals) {
  auto e = parse_endpoint("127.0.0.1:7400");
  BOOST_REQUIRE(e.has_value());
  BOOST_TEST(e->host == "127.0.0.1");
  BOOST_TEST(e->port == 7400);
  BOOST_TEST(!e->is_ipv6());
  BOOST_TEST(e->to_string() == "127.0.0.1:7400");

  e = parse_endpoint("[::1]:65535");
  BOOST_REQUIRE(e.has_value());
  BOOST_TEST(e->host == "::1");
  BOOST_TEST(e->port == 65535);
  BOOST_TEST(e->is_ipv6());
  BOOST_TEST(e->to_string() == "[::1]:65535");

  e = parse_endpoint("0.0.0.0:0");  // port 0: any free port (listeners in tests)
  BOOST_REQUIRE(e.has_value());
  BOOST_TEST(e->port == 0);
  BOOST_TEST(parse_endpoint("[fe80::1:2]:80").has_value());
  BOOST_TEST(parse_endpoint("[::ffff:10.0.0.1]:80").has_value());
}

BOOST_AUTO_TEST_CASE(refuses_everything_else) {
  for (const char* text : {"",
                           "127.0.0.1",
                           "127.0.0.1:",
                           ":80",
                           "localhost:80",
                           "example.com:80",
                           "::1:80",
                           "[::1]",
                           "[::1]80",
                           "[::1]:",
                           "[127.0.0.1]:80",
                           "1.2.3:80",
                           "1.2.3.256:80",
                           "127.0.0.1:65536",
                           "127.0.0.1:-1",
                           "127.0.0.1:+80",
                           "127.0.0.1:80x",
                           "127.0.0.1:123456",
                           " 127.0.0.1:80",
                           "[::1:80",
                           "01.2.3.4:80"}) {
    BOOST_TEST_INFO("endpoint \"" << text << '"');
    BOOST_TEST(!parse_endpoint(text).has_value());
  }
  BOOST_TEST(!parse_endpoint(std::string("127.0.0.1\0x:80", 13)).has_value());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(allow_list)

BOOST_AUTO_TEST_CASE(ipv4_blocks) {
  const auto block = parse_cidr("10.1.0.0/16").value();
  BOOST_TEST(!block.ipv6);
  BOOST_TEST(block.prefix_length == 16);
  BOOST_TEST(block.contains(v4(10, 1, 2, 3)));
  BOOST_TEST(block.contains(v4(10, 1, 255, 255)));
  BOOST_TEST(!block.contains(v4(10, 2, 0, 1)));
  const auto odd = parse_cidr("192.168.0.128/25").value();
  BOOST_TEST(odd.contains(v4(192, 168, 0, 200)));
  BOOST_TEST(!odd.contains(v4(192, 168, 0, 127)));
  const auto all = parse_cidr("0.0.0.0/0").value();
  BOOST_TEST(all.contains(v4(8, 8, 8, 8)));
  const auto host = parse_cidr("127.0.0.1").value();
  BOOST_TEST(host.prefix_length == 32);
  BOOST_TEST(host.contains(v4(127, 0, 0, 1)));
  BOOST_TEST(!host.contains(v4(127, 0, 0, 2)));
}

BOOST_AUTO_TEST_CASE(ipv6_blocks_and_mapped_ipv4) {
  const auto block = parse_cidr("fd00::/8").value();
  BOOST_TEST(block.ipv6);
  std::array<std::uint8_t, 16> inside{0xfd, 0x12};
  std::array<std::uint8_t, 16> outside{0xfe, 0x80};
  BOOST_TEST(block.contains(inside));
  BOOST_TEST(!block.contains(outside));
  BOOST_TEST(!block.contains(v4(10, 0, 0, 1)));  // an IPv4 peer is not in an IPv6 block

  // What a dual-stack listener reports for 10.9.8.7: ::ffff:10.9.8.7.
  std::array<std::uint8_t, 16> mapped{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 9, 8, 7};
  BOOST_TEST(parse_cidr("10.0.0.0/8").value().contains(mapped));
  BOOST_TEST(!parse_cidr("11.0.0.0/8").value().contains(mapped));
  BOOST_TEST(!parse_cidr("10.0.0.0/8").value().contains(inside));
}

BOOST_AUTO_TEST_CASE(refusals_say_why) {
  std::string why;
  BOOST_TEST(!parse_cidr("10.0.0.0/", &why).has_value());
  BOOST_TEST(why == "prefix length must be 0..32");
  BOOST_TEST(!parse_cidr("::/129", &why).has_value());
  BOOST_TEST(why == "prefix length must be 0..128");
  BOOST_TEST(!parse_cidr("fd00::1/8", &why).has_value());
  BOOST_TEST(why == "host bits are set after the /8 prefix (did you mean fd00::/8?)");
  BOOST_TEST(!parse_cidr("10.0.0.0/8x").has_value());
  BOOST_TEST(!parse_cidr("").has_value());
  BOOST_TEST(!parse_cidr("host.example/8").has_value());
}

BOOST_AUTO_TEST_CASE(empty_list_allows_everyone) {
  std::vector<cidr_block> allow;
  BOOST_TEST(allowed_by(allow, v4(1, 2, 3, 4)));
  allow = {parse_cidr("127.0.0.0/8").value(), parse_cidr("::1").value()};
  BOOST_TEST(allowed_by(allow, v4(127, 0, 0, 9)));
  BOOST_TEST(!allowed_by(allow, v4(10, 0, 0, 1)));
  std::array<std::uint8_t, 16> loopback6{};
  loopback6[15] = 1;
  BOOST_TEST(allowed_by(allow, loopback6));
}

BOOST_AUTO_TEST_SUITE_END()

// The kernel TLS probe asks the kernel as a connection would (TCP_ULP "tls" on a loopback
// socket), so it answers where /proc/sys is hidden (the packaged unit's ProcSubset=pid); where
// /proc is readable, both must agree. On a host without the module (this one), it says "not
// loaded": a probe that cannot ask says "unknown", never a wrong "not loaded".
BOOST_AUTO_TEST_CASE(the_kernel_tls_probe_agrees_with_proc) {
  const kernel_tls_state probed = probe_kernel_tls();
  BOOST_TEST_MESSAGE("kernel TLS: " << to_string(probed));
  BOOST_TEST((probed != kernel_tls_state::unknown));
  BOOST_TEST(
      (probed == (kernel_tls_loaded() ? kernel_tls_state::loaded : kernel_tls_state::not_loaded)));
  BOOST_TEST(to_string(kernel_tls_state::not_loaded) == "not loaded");
}

// A paused supplier session reads nothing, yet must learn that its peer left: the kernel tells
// at once, with what the peer sent before its FIN still unread, and not before.
BOOST_AUTO_TEST_CASE(a_peer_that_left_is_seen_with_its_data_unread) {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  asio::ip::tcp::socket client(io);
  client.connect(acceptor.local_endpoint());
  asio::ip::tcp::socket server = acceptor.accept();
  BOOST_TEST(!peer_has_left(server.native_handle()));
  asio::write(client, asio::buffer(std::string("unread bytes")));
  BOOST_TEST(!peer_has_left(server.native_handle()));  // data alone is no leaving
  client.shutdown(asio::ip::tcp::socket::shutdown_send);
  BOOST_TEST(gatewayd::test::wait_until([&] { return peer_has_left(server.native_handle()); },
                                        std::chrono::seconds(5)));
  BOOST_TEST(server.available() == std::string("unread bytes").size());
}
