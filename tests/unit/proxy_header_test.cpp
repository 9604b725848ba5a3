// The PROXY protocol v2 parser against headers built byte by byte from the spec (and one that
// HAProxy 2.6 really sent): addresses, LOCAL, the families a TCP supplier cannot have, every
// refusal, and that it never takes a byte past the header.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "net/proxy_header.hpp"

using namespace gatewayd::net;
using status = proxy_parse_result::status;

namespace {

using bytes = std::vector<std::uint8_t>;

// The fixed 16 bytes for `ver_cmd`, `family` and an address block of `length` bytes.
bytes fixed(std::uint8_t ver_cmd, std::uint8_t family, std::uint16_t length) {
  bytes b = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};
  b.push_back(ver_cmd);
  b.push_back(family);
  b.push_back(static_cast<std::uint8_t>(length >> 8));
  b.push_back(static_cast<std::uint8_t>(length));
  return b;
}

// PROXY TCP4 192.0.2.7:4567 -> 198.51.100.1:7400, then `tail` (the supplier's first bytes).
bytes tcp4(const bytes& tail = {}, std::uint16_t extra = 0) {
  bytes b = fixed(0x21, 0x11, static_cast<std::uint16_t>(12 + extra));
  for (std::uint8_t x : {192, 0, 2, 7, 198, 51, 100, 1})
    b.push_back(x);
  for (std::uint8_t x : {0x11, 0xD7, 0x1C, 0xE8})  // ports 4567, 7400
    b.push_back(x);
  for (std::uint16_t i = 0; i < extra; ++i)
    b.push_back(0xAA);  // TLVs, skipped unread
  b.insert(b.end(), tail.begin(), tail.end());
  return b;
}

proxy_parse_result parse(const bytes& b) {
  return parse_proxy_v2(b);
}

}  // namespace

BOOST_AUTO_TEST_CASE(tcp4_gives_the_source_and_stops_at_the_header) {
  const auto r = parse(tcp4({'G', 'W', 'P', '1'}));
  BOOST_REQUIRE(r.state == status::done);
  BOOST_TEST(r.header.size == 28u);
  BOOST_TEST(!r.header.local);
  BOOST_REQUIRE(r.header.source.has_value());
  BOOST_TEST(r.header.source->to_string() == "192.0.2.7:4567");
  BOOST_TEST(r.header.destination->to_string() == "198.51.100.1:7400");
  BOOST_TEST(r.header.source->address().size() == 4u);
}

BOOST_AUTO_TEST_CASE(tcp6_gives_the_source) {
  bytes b = fixed(0x21, 0x21, 36);
  const bytes src = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};
  b.insert(b.end(), src.begin(), src.end());
  b.insert(b.end(), 16, 0);  // destination ::
  for (std::uint8_t x : {0x00, 0x50, 0x1C, 0xE8})
    b.push_back(x);
  const auto r = parse(b);
  BOOST_REQUIRE(r.state == status::done);
  BOOST_REQUIRE(r.header.source.has_value());
  BOOST_TEST(r.header.source->to_string() == "[2001:db8::1]:80");
  BOOST_TEST(r.header.source->address().size() == 16u);
}

BOOST_AUTO_TEST_CASE(what_haproxy_sends_is_understood) {
  // `send-proxy-v2` from Debian's HAProxy 2.6.12 for a client 127.0.0.1:45678 of its frontend
  // 127.0.0.1:17400, captured by the server it connected to: TCP4 and no TLVs, then the
  // client's first bytes.
  const bytes wire = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54,
                      0x0a, 0x21, 0x11, 0x00, 0x0c, 0x7f, 0x00, 0x00, 0x01, 0x7f, 0x00,
                      0x00, 0x01, 0xb2, 0x6e, 0x43, 0xf8, 'G',  'W',  'P',  '1'};
  const auto r = parse(wire);
  BOOST_REQUIRE(r.state == status::done);
  BOOST_TEST(r.header.size == 28u);
  BOOST_TEST(r.header.source->to_string() == "127.0.0.1:45678");
  BOOST_TEST(r.header.destination->to_string() == "127.0.0.1:17400");
}

BOOST_AUTO_TEST_CASE(tlvs_are_skipped_as_part_of_the_header) {
  const auto r = parse(tcp4({'x'}, 20));
  BOOST_REQUIRE(r.state == status::done);
  BOOST_TEST(r.header.size == 48u);
  BOOST_TEST(r.header.source->to_string() == "192.0.2.7:4567");
}

BOOST_AUTO_TEST_CASE(local_keeps_the_connection_address) {
  // A health check: LOCAL, family UNSPEC, no addresses; even a nonsense family is ignored.
  for (std::uint8_t family : {0x00, 0x11, 0xFF}) {
    const auto r = parse(fixed(0x20, family, 0));
    BOOST_REQUIRE(r.state == status::done);
    BOOST_TEST(r.header.local);
    BOOST_TEST(!r.header.source.has_value());
    BOOST_TEST(r.header.size == 16u);
  }
}

BOOST_AUTO_TEST_CASE(families_a_tcp_supplier_cannot_have_keep_the_connection_address) {
  for (std::uint8_t family : {0x00, 0x12, 0x31}) {  // UNSPEC, UDP over IPv4, AF_UNIX stream
    const std::uint16_t len = family == 0x31 ? 216 : family == 0x12 ? 12 : 0;
    bytes b = fixed(0x21, family, len);
    b.insert(b.end(), len, 0);
    const auto r = parse(b);
    BOOST_TEST_CONTEXT("family " << int(family)) {
      BOOST_REQUIRE(r.state == status::done);
      BOOST_TEST(!r.header.source.has_value());
      BOOST_TEST(r.header.size == 16u + len);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_partial_header_asks_for_exactly_what_is_missing) {
  const bytes whole = tcp4({'G', 'W'}, 4);
  for (std::size_t n = 0; n < 32; ++n) {
    const auto r = parse_proxy_v2(std::span(whole.data(), n));
    BOOST_TEST_CONTEXT(n << " bytes") {
      BOOST_REQUIRE(r.state == status::need_more);
      BOOST_TEST(r.needed == (n < 16 ? 16u : 32u));
      BOOST_TEST(r.needed > n);
    }
  }
  BOOST_TEST((parse_proxy_v2(std::span(whole.data(), 32)).state == status::done));
}

BOOST_AUTO_TEST_CASE(every_malformed_header_is_refused_with_its_reason) {
  // A GWP/1 supplier (or a v1 text header) fails on its first byte, before 16 arrive.
  BOOST_TEST((parse({'G'}).error == proxy_error::bad_signature));
  BOOST_TEST((parse({'P', 'R', 'O', 'X', 'Y', ' '}).error == proxy_error::bad_signature));
  bytes b = tcp4();
  b[11] = 0x0B;
  BOOST_TEST((parse(b).error == proxy_error::bad_signature));
  BOOST_TEST((parse(fixed(0x11, 0x11, 12)).error == proxy_error::bad_version));
  BOOST_TEST((parse(fixed(0x22, 0x11, 12)).error == proxy_error::bad_command));
  BOOST_TEST((parse(fixed(0x21, 0x41, 12)).error == proxy_error::bad_family));
  BOOST_TEST((parse(fixed(0x21, 0x13, 12)).error == proxy_error::bad_family));
  BOOST_TEST((parse(fixed(0x21, 0x11, 11)).error == proxy_error::short_address));
  BOOST_TEST((parse(fixed(0x21, 0x21, 35)).error == proxy_error::short_address));
  BOOST_TEST((parse(fixed(0x21, 0x11, 1025)).error == proxy_error::too_long));
  // Refused from the 16 fixed bytes alone: nothing more is read from such a peer.
  BOOST_TEST((parse(fixed(0x21, 0x11, 0xFFFF)).state == status::error));
  BOOST_TEST((parse(fixed(0x21, 0x11, 1024)).state == status::need_more));
  for (auto e : {proxy_error::bad_signature, proxy_error::too_long})
    BOOST_TEST(!to_string(e).empty());
}
