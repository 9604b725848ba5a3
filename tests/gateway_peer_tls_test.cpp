// gateway-peer's TLS: the sender as a (mutual) TLS client of gatewayd's supplier listener and of
// a TLS receiver, the receiver as the TLS server the consumer leg dials, and their refusals.
#define BOOST_TEST_MODULE gateway_peer_tls
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "tests/support/gateway_fixture.hpp"
#include "tests/support/peer_tool.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"
#include "tests/support/tls_peers.hpp"

using namespace gatewayd::test;
using namespace std::chrono_literals;

namespace {

const std::string& peer = peer_binary();

// `send` to `port` with the test CA and `cert` (none: "") as its client certificate.
std::vector<std::string> tls_send(const pki& p, unsigned short port, const std::string& cert,
                                  const std::string& server_name, int count) {
  std::vector<std::string> args = {"send",
                                   "--to",
                                   "127.0.0.1:" + std::to_string(port),
                                   "--address",
                                   "bench.tls",
                                   "--count",
                                   std::to_string(count),
                                   "--json",
                                   "--tls-ca",
                                   p.at("ca.crt").string(),
                                   "--tls-server-name",
                                   server_name};
  if (!cert.empty()) {
    args.insert(args.end(), {"--tls-cert", p.at(cert + ".crt").string(), "--tls-key",
                             p.at(cert + ".key").string()});
  }
  return args;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_tls_sender_publishes_through_a_mutual_tls_gateway) {
  pki p;
  temp_dir dir;
  constexpr int n = 20000;
  peer_receiver recv(dir, "recv", {"--expect", std::to_string(n), "--duration", "60", "--json"});
  gateway_fixture gw(consumer_toml("sink", recv.endpoint(), "queue_capacity = 100000") +
                         route_toml("bench.>", {"sink"}),
                     "", {}, true, p.tls_table(true));
  BOOST_TEST_REQUIRE(gw.consumers_connected({"sink"}));
  const auto sent = run_command(peer, tls_send(p, gw.supplier_port, "orders", "gateway.test", n));
  BOOST_TEST(sent.exit_code == 0, sent.err);
  BOOST_TEST(json_field(sent.out, "frames") == n);
  const auto code = recv.process->wait_exit(60s);
  BOOST_TEST_REQUIRE(code.has_value(), "receiver did not finish: " << recv.process->log());
  const auto log = recv.process->log();
  BOOST_TEST(json_field(log, "frames") == n);
  BOOST_TEST(json_field(log, "lost") == 0);
  BOOST_TEST(json_field(log, "corrupt") == 0);
  BOOST_TEST(scrape_metric(gw.metrics_port, "gatewayd_supplier_tls_handshakes_total") == 1);
}

// The receiver as a TLS server requiring a client certificate: what the gateway's consumer leg
// will dial. Here the TLS sender plays the gateway.
BOOST_AUTO_TEST_CASE(a_tls_receiver_verifies_and_counts_every_frame) {
  pki p;
  temp_dir dir;
  constexpr int n = 50000;
  peer_receiver recv(dir, "recv",
                     {"--expect", std::to_string(n), "--duration", "60", "--json", "--tls-cert",
                      p.at("gateway.crt").string(), "--tls-key", p.at("gateway.key").string(),
                      "--tls-client-ca", p.at("ca.crt").string()});
  // Refused: no client certificate; a server name the certificate does not carry.
  // (TLS 1.3: the client's handshake ends before the server judged its certificate, so a
  // short send may end before the refusal arrives; the receiver's log tells.)
  run_command(peer, tls_send(p, recv.port, "", "gateway.test", 10));
  const auto misnamed = run_command(peer, tls_send(p, recv.port, "orders", "elsewhere.test", 10));
  BOOST_TEST(misnamed.exit_code == 1);
  BOOST_TEST(misnamed.err.find("hostname mismatch") != std::string::npos, misnamed.err);

  const auto sent = run_command(peer, tls_send(p, recv.port, "orders", "gateway.test", n));
  BOOST_TEST(sent.exit_code == 0, sent.err);
  const auto code = recv.process->wait_exit(60s);
  BOOST_TEST_REQUIRE(code.has_value(), "receiver did not finish: " << recv.process->log());
  BOOST_TEST(*code == 0, recv.process->log());
  const auto log = recv.process->log();
  BOOST_TEST(json_field(log, "frames") == n);
  BOOST_TEST(json_field(log, "lost") == 0);
  BOOST_TEST(json_field(log, "corrupt") == 0);
  BOOST_TEST(log.find("peer did not return a certificate") != std::string::npos, log);
}

BOOST_AUTO_TEST_CASE(tls_flags_that_do_not_go_together_exit_2) {
  struct bad {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<bad> cases = {
      {{"send", "--to", "127.0.0.1:7400", "--address", "a", "--tls-cert", "c.crt"},
       "TLS needs --tls-ca"},
      {{"send", "--to", "127.0.0.1:7400", "--address", "a", "--tls-ca", "ca.crt", "--tls-cert",
        "c.crt"},
       "--tls-cert and --tls-key together"},
      {{"send", "--to", "127.0.0.1:7400", "--address", "a", "--tls-ca", "ca.crt", "--reconnect"},
       "cannot go with --reconnect"},
      {{"recv", "--listen", "127.0.0.1:0", "--tls-ca", "ca.crt"}, "are for send"},
      {{"recv", "--listen", "127.0.0.1:0", "--tls-client-ca", "ca.crt"}, "needs --tls-cert"},
      {{"recv", "--listen", "127.0.0.1:0", "--tls-colour", "x"}, "unknown option '--tls-colour'"},
  };
  for (const auto& c : cases) {
    const auto r = run_command(peer, c.args);
    BOOST_TEST(r.exit_code == 2, c.message);
    BOOST_TEST(r.err.find(c.message) != std::string::npos, r.err);
  }
  const auto missing = run_command(peer, {"recv", "--listen", "127.0.0.1:0", "--tls-cert",
                                          "/nonexistent.crt", "--tls-key", "/nonexistent.key"});
  BOOST_TEST(missing.exit_code == 1);
  BOOST_TEST(missing.err.find("/nonexistent.crt") != std::string::npos, missing.err);
}
