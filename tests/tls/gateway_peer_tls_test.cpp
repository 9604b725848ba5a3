// gateway-peer's TLS: the sender as a (mutual) TLS client of gatewayd's supplier listener and of
// a TLS receiver, the receiver as the TLS server the consumer leg dials, and their refusals.
#include <boost/test/unit_test.hpp>

#include <csignal>
#include <string>
#include <vector>

#include "protocol/control_message.hpp"
#include "protocol/frame_codec.hpp"

#include "tests/support/gateway_fixture.hpp"
#include "tests/support/peer_tool.hpp"
#include "tests/support/raw_tls_client.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"
#include "tests/support/tls_peers.hpp"
#include "tools/traffic/payload_header.hpp"

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

// A receiver expecting `n` frames, fed by a gateway that takes suppliers over mutual TLS only
// and routes bench.> to it.
struct tls_gateway_to_sink {
  pki p;
  temp_dir dir;
  peer_receiver recv;
  gateway_fixture gw;
  explicit tls_gateway_to_sink(int n)
      : recv(dir, "recv", {"--expect", std::to_string(n), "--duration", "60", "--json"}),
        gw(consumer_toml("sink", recv.endpoint(), "queue_capacity = 100000") +
               route_toml("bench.>", {"sink"}),
           "", {}, true, p.tls_table(true)) {
    BOOST_TEST_REQUIRE(gw.consumers_connected({"sink"}));
  }
  // The receiver got all `n`, none lost or corrupt.
  void expect_delivered(int n) const {
    const auto code = recv.process->wait_exit(60s);
    BOOST_TEST_REQUIRE(code.has_value(), "receiver did not finish: " << recv.process->log());
    const auto log = recv.process->log();
    BOOST_TEST(json_field(log, "frames") == n);
    BOOST_TEST(json_field(log, "lost") == 0);
    BOOST_TEST(json_field(log, "corrupt") == 0);
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_tls_sender_publishes_through_a_mutual_tls_gateway) {
  constexpr int n = 20000;
  tls_gateway_to_sink t(n);
  const auto sent =
      run_command(peer, tls_send(t.p, t.gw.supplier_port, "orders", "gateway.test", n));
  BOOST_TEST(sent.exit_code == 0, sent.err);
  BOOST_TEST(json_field(sent.out, "frames") == n);
  t.expect_delivered(n);
  BOOST_TEST(scrape_metric(t.gw.metrics_port, "gatewayd_supplier_tls_handshakes_total") == 1);
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

// recv --ack over TLS: its acks go back through the TLS stream it serves (records handed to
// OpenSSL without waiting), cumulative, a few for one write of 300 frames, not one per frame.
BOOST_AUTO_TEST_CASE(a_tls_receiver_acks_through_tls) {
  namespace protocol = gatewayd::protocol;
  pki p;
  temp_dir dir;
  constexpr std::uint64_t n = 300;
  peer_receiver recv(dir, "recv",
                     {"--ack", "--duration", "60", "--json", "--tls-cert",
                      p.at("gateway.crt").string(), "--tls-key", p.at("gateway.key").string()});
  raw_tls_client gw(p, "");
  BOOST_TEST_REQUIRE(gw.connect(recv.port), gw.why());
  std::string frames;
  for (std::uint64_t i = 0; i < n; ++i) {
    std::string payload(64, 'x');
    gatewayd::traffic::store_header(payload.data(), {1, i, 0, 5});
    protocol::append_frame(frames, "orders.a", payload);
  }
  BOOST_TEST_REQUIRE(gw.write(frames));
  std::string in;
  std::uint64_t last = 0;
  long long acks = 0;
  while (last < n) {
    BOOST_TEST_REQUIRE(gw.read_some(in), recv.process->log());
    for (;;) {
      const auto r = protocol::parse_frame(in, 9, protocol::control_frames);
      if (r.state == protocol::parse_result::status::need_more) break;
      BOOST_TEST_REQUIRE((r.state == protocol::parse_result::status::frame));
      const auto m = protocol::parse_control(r.frame);
      BOOST_TEST_REQUIRE(m.message.has_value());
      BOOST_TEST_REQUIRE((m.message->what == protocol::control_message::kind::ack));
      BOOST_TEST_REQUIRE(m.message->number > last);
      BOOST_TEST_REQUIRE(m.message->number <= n);
      last = m.message->number;
      ++acks;
      in.erase(0, r.frame.bytes.size());
    }
  }
  BOOST_TEST(acks < static_cast<long long>(n));
  recv.process->signal(SIGINT);
  const auto code = recv.process->wait_exit(20s);
  BOOST_TEST_REQUIRE(code.has_value());
  BOOST_TEST(*code == 0, recv.process->log());
  const auto log = recv.process->log();
  BOOST_TEST(json_field(log, "frames") == static_cast<long long>(n));
  BOOST_TEST(json_field(log, "lost") == 0);
  BOOST_TEST(json_field(log, "acks") == acks);
}

// Issue 33: `send --confirm` over TLS (refused before): the CONFIRM frames go through the TLS
// stream, the gateway's confirms come back through it while the sender writes, every frame is
// confirmed and delivered.
BOOST_AUTO_TEST_CASE(a_tls_sender_in_confirm_mode_gets_every_frame_confirmed) {
  constexpr int n = 20000;
  tls_gateway_to_sink t(n);
  auto args = tls_send(t.p, t.gw.supplier_port, "orders", "gateway.test", n);
  args.insert(args.end(), {"--confirm", "--window", "1000", "--confirm-wait", "20"});
  const auto sent = run_command(peer, args, 60s);
  BOOST_TEST(sent.exit_code == 0, sent.err);
  BOOST_TEST(json_field(sent.out, "frames") == n);
  BOOST_TEST(json_field(sent.out, "confirmed") == n, sent.out << sent.err << t.gw.daemon->log());
  BOOST_TEST(json_field(sent.out, "unconfirmed") == 0, sent.out);
  t.expect_delivered(n);
}
