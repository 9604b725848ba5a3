// A plaintext client on the TLS port, through the real daemon: closed with no byte sent, counted
// as not_tls (what docs/security.md says it gets).
#include <boost/test/unit_test.hpp>

#include <asio.hpp>
#include <chrono>
#include <string>

#include "protocol/frame_codec.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"
#include "tests/support/tls_peers.hpp"

using namespace gatewayd::test;
using namespace std::chrono_literals;

namespace {

std::string failures(const std::string& reason) {
  return "gatewayd_supplier_tls_handshake_failures_total{reason=\"" + reason + "\"}";
}

}  // namespace

// What a plaintext client on the TLS port gets (docs/security.md): OpenSSL finds no TLS record
// header in its first bytes and the gateway closes the connection at once, sending nothing (no
// alert: the peer would not read one), counted as not_tls. A GWP/1 frame, an HTTP request and
// 16 zero bytes.
BOOST_AUTO_TEST_CASE(plaintext_client_on_the_tls_port_is_closed_with_no_bytes) {
  pki p;
  test_consumer sink;
  gateway_fixture gw(consumer_toml("sink", sink.endpoint()) + route_toml(">", {"sink"}), "", {},
                     true, p.tls_table(true));
  double counted = 0;
  for (const auto& request :
       {gatewayd::protocol::encode_frame("a.b", "in clear"),
        std::string("GET /metrics HTTP/1.1\r\nHost: gw.test\r\n\r\n"), std::string(16, '\0')}) {
    asio::io_context ioc;
    asio::ip::tcp::socket plain(ioc);
    plain.connect({asio::ip::make_address("127.0.0.1"), gw.supplier_port});
    const auto started = std::chrono::steady_clock::now();
    asio::write(plain, asio::buffer(request));
    std::error_code ec;  // read to the end, counting every byte sent before the close
    std::size_t received = 0;
    char buf[256];
    while (!ec)
      received += plain.read_some(asio::buffer(buf), ec);
    BOOST_TEST(received == 0u, request.substr(0, 3) << ": " << received << " bytes");
    BOOST_TEST((ec == asio::error::eof || ec == asio::error::connection_reset), ec.message());
    BOOST_TEST((std::chrono::steady_clock::now() - started < 2s));
    BOOST_TEST(wait_metric(gw.metrics_port, failures("not_tls"), ++counted) == counted);
  }
  BOOST_TEST(gw.daemon->wait_for_log("TLS handshake failed (not_tls)", 5s).has_value());
  BOOST_TEST(sink.count() == 0u);
}
