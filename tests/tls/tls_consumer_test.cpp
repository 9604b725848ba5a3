// TLS from the gateway to its consumers, end to end: the real daemon dials TLS consumers (test
// servers on 127.0.0.1 with certificates the openssl CLI makes at run time) and must verify them,
// present its client certificate when told to, refuse what does not check out, and recover on a
// reload that fixes the tls block.
#include <sys/socket.h>
#include <sys/time.h>

#include <boost/test/unit_test.hpp>

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/gateway_fixture.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"
#include "tests/support/tls_consumer_peer.hpp"
#include "tests/support/tls_peers.hpp"

using namespace gatewayd::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

std::string failures(const std::string& reason) {
  return "gatewayd_consumer_connect_failures_total{consumer=\"billing\",reason=\"" + reason + "\"}";
}

// routes.toml with one consumer, billing, fed by "orders.>", whose tls table holds `tls`.
std::string routes(const std::string& endpoint, const std::string& tls) {
  return consumer_toml("billing", endpoint, "tls = { " + tls + " }") +
         route_toml("orders.>", {"billing"});
}

std::string quoted(const fs::path& p) {
  return "\"" + p.string() + "\"";
}

// Replaces routes.toml (as an editor would), sends SIGHUP and waits for the reload's outcome.
bool reload(gateway_fixture& gw, const std::string& text, const std::string& result) {
  const std::string series = "gatewayd_config_reloads_total{result=\"" + result + "\"}";
  const double before = scrape_metric(gw.metrics_port, series);
  gw.dir.write("routes.toml.new", text);
  fs::rename(gw.dir.path() / "routes.toml.new", gw.dir.path() / "routes.toml");
  gw.daemon->signal(SIGHUP);
  return eventually([&] { return scrape_metric(gw.metrics_port, series) > before; }, 10s);
}

// Frames "payload N", each followed by `padding` bytes of 'x'.
void send_frames(unsigned short port, int from, int to, std::size_t padding = 0) {
  test_supplier s(port);
  std::string frames;
  for (int i = from; i < to; ++i) {
    frames += gatewayd::protocol::encode_frame(
        "orders.eu.created", "payload " + std::to_string(i) + std::string(padding, 'x'));
  }
  s.send(frames);
}

double sent(const gateway_fixture& gw) {
  return scrape_metric(gw.metrics_port,
                       "gatewayd_consumer_messages_sent_total{consumer=\"billing\"}");
}

}  // namespace

// (a) Frames reach a TLS consumer whole and in order; the sent counter matches what arrived.
// 3,000 frames of about 600 bytes: several 256 KiB writes, frames cut between them.
BOOST_AUTO_TEST_CASE(frames_are_delivered_over_tls_in_order) {
  pki p;
  tls_test_consumer billing(p, "billing", false);
  gateway_fixture gw(routes(billing.endpoint(), "ca = " + quoted(p.at("ca.crt")) +
                                                    ", server_name = \"billing.internal\""));
  BOOST_TEST_REQUIRE(gw.consumers_connected({"billing"}));
  send_frames(gw.supplier_port, 0, 3000, 600);
  BOOST_TEST_REQUIRE(billing.wait_for_count(3000, 10s));
  const auto got = billing.payloads();
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] != "payload " + std::to_string(i) + std::string(600, 'x'))
      BOOST_FAIL("frame " << i << " is " << got[i].substr(0, 20));
  }
  BOOST_TEST(billing.corruptions() == 0u);
  BOOST_TEST(billing.handshakes() == 1u);
  BOOST_TEST(eventually([&] { return sent(gw) == 3000; }, 5s));
  // The CA bundle joins the certificate expiry metric.
  BOOST_TEST(
      scrape_metric(gw.metrics_port, "gatewayd_tls_certificate_expiry_timestamp_seconds{file=\"" +
                                         p.at("ca.crt").string() + "\"}") > 0);
  // A gateway that stops closes the connection with close_notify: the consumer tells that from
  // a cut connection (a truncated stream) and knows nothing is missing.
  gw.daemon->signal(SIGTERM);
  BOOST_TEST(gw.daemon->wait_exit(10s).value_or(-1) == 0);
  BOOST_TEST(eventually([&] { return billing.clean_closes() == 1; }, 5s));
  BOOST_TEST(billing.cut_closes() == 0u);
}

// (a') A TLS write hands OpenSSL up to tls_channel::stage_bytes at once, copied together from
// frames lying apart, and goes on from the staged bytes after a full socket: one supplier's
// frames of 20 B to 6 KB, every third one to a second consumer, cross the staging buffer's edges
// at every offset. Both consumers get every frame whole and in order.
BOOST_AUTO_TEST_CASE(frames_of_every_size_cross_the_staging_buffer_whole_and_in_order) {
  pki p;
  tls_test_consumer billing(p, "billing", false);
  tls_test_consumer audit(p, "billing", false);
  const std::string tls =
      "tls = { ca = " + quoted(p.at("ca.crt")) + ", server_name = \"billing.internal\" }";
  gateway_fixture gw(consumer_toml("billing", billing.endpoint(), tls) +
                     consumer_toml("audit", audit.endpoint(), tls) +
                     route_toml("orders.>", {"billing"}) + route_toml("audit.>", {"audit"}));
  BOOST_TEST_REQUIRE(gw.consumers_connected({"billing", "audit"}));
  std::vector<std::string> to_billing, to_audit;
  std::string frames;
  std::uint32_t state = 12345;  // a fixed sequence of sizes: the same runs every time
  for (int i = 0; i < 4000; ++i) {
    state = state * 1103515245u + 12345u;
    const std::size_t size = 20 + (state >> 8) % (i % 50 < 25 ? 6000 : 200);
    std::string payload =
        std::to_string(i) + ":" + std::string(size, static_cast<char>('a' + i % 26));
    const bool billing_frame = i % 3 != 2;
    frames += gatewayd::protocol::encode_frame(billing_frame ? "orders.eu" : "audit.eu", payload);
    (billing_frame ? to_billing : to_audit).push_back(std::move(payload));
  }
  test_supplier(gw.supplier_port).send(frames);
  BOOST_TEST_REQUIRE(billing.wait_for_count(to_billing.size(), 20s), "got " << billing.count());
  BOOST_TEST_REQUIRE(audit.wait_for_count(to_audit.size(), 20s), "got " << audit.count());
  BOOST_TEST((billing.payloads() == to_billing), "billing's frames differ or are out of order");
  BOOST_TEST((audit.payloads() == to_audit), "audit's frames differ or are out of order");
  BOOST_TEST(billing.corruptions() + audit.corruptions() == 0u);
}

// A TLS consumer that reads as fast as frames come is never dropped from, whatever its policy:
// a burst 40 times its queue, with the default policy and a grace shorter than the burst,
// arrives whole (the gateway pauses the supplier instead). Under ASan the test peer decrypts
// slowly enough that 620 KB (its whole queue) can take it over 20 ms: it is then slow by the
// gateway's definition, and was dropped from in 4 of 6 runs; the grace scales with the peer.
BOOST_AUTO_TEST_CASE(a_tls_consumer_that_keeps_up_loses_nothing_to_a_burst) {
  pki p;
  tls_test_consumer billing(p, "billing", false);
  gateway_fixture gw(consumer_toml("billing", billing.endpoint(),
                                   "queue_capacity = 1000\ntls = { ca = " + quoted(p.at("ca.crt")) +
                                       ", server_name = \"billing.internal\" }") +
                         route_toml("orders.>", {"billing"}),
                     // Shorter than the burst takes (~25 MB through TLS), and long enough
                     // that a reader the scheduler sets aside for a few time slices on a
                     // loaded machine still counts as keeping up (20 ms did not: it dropped).
                     "slow_consumer_ms = " + std::to_string(100 * peer_slowdown()) + "\n");
  BOOST_TEST_REQUIRE(gw.consumers_connected({"billing"}));
  constexpr int burst = 40000;  // ~25 MB
  send_frames(gw.supplier_port, 0, burst, 600);
  BOOST_TEST_REQUIRE(billing.wait_for_count(burst, 30s), "got " << billing.count());
  BOOST_TEST(billing.corruptions() == 0u);
  BOOST_TEST(scrape_metric(gw.metrics_port,
                           "gatewayd_consumer_dropped_messages_total{consumer=\"billing\","
                           "reason=\"queue_full\"}") == 0);
  BOOST_TEST(scrape_metric(gw.metrics_port, "gatewayd_supplier_backpressure_pauses_total") > 0);
}

// (b) A certificate without the expected name is refused, and said why; a reload that fixes
// server_name (and names the CA relative to routes.toml) delivers what waited.
BOOST_AUTO_TEST_CASE(a_wrong_server_name_is_refused_until_a_reload_fixes_it) {
  pki p;
  tls_test_consumer billing(p, "billing", false);
  gateway_fixture gw(routes(billing.endpoint(), "ca = " + quoted(p.at("ca.crt")) +
                                                    ", server_name = \"payments.internal\""));
  BOOST_TEST(wait_metric(gw.metrics_port, failures("tls_wrong_name"), 1) >= 1);
  BOOST_TEST(gw.daemon->wait_for_log("does not carry the name payments.internal", 5s).has_value());
  send_frames(gw.supplier_port, 0, 100);
  std::this_thread::sleep_for(300ms);
  BOOST_TEST(billing.count() == 0u);
  BOOST_TEST(sent(gw) == 0);

  fs::copy_file(p.at("ca.crt"), gw.dir.path() / "ca.crt");
  BOOST_TEST_REQUIRE(
      reload(gw, routes(billing.endpoint(), "ca = \"ca.crt\", server_name = \"billing.internal\""),
             "success"));
  BOOST_TEST_REQUIRE(billing.wait_for_count(100, 10s));
  BOOST_TEST(billing.payloads().front() == "payload 0");
  BOOST_TEST(eventually([&] { return sent(gw) == 100; }, 5s));
}

// (c) A consumer that requires a client certificate takes the gateway's, and refuses it without.
BOOST_AUTO_TEST_CASE(a_consumer_requiring_a_client_certificate) {
  pki p;
  tls_test_consumer billing(p, "billing", true);
  const std::string base =
      "ca = " + quoted(p.at("ca.crt")) + ", server_name = \"billing.internal\"";
  gateway_fixture gw(routes(billing.endpoint(), base));
  BOOST_TEST(wait_metric(gw.metrics_port, failures("tls_rejected"), 1) >= 1);
  BOOST_TEST(billing.failed_handshakes() >= 1u);
  BOOST_TEST(billing.count() == 0u);
  BOOST_TEST(gw.daemon->wait_for_log("does it want a client certificate?", 5s).has_value());
  // Frames routed meanwhile wait in the queue: TLS 1.3 judges our certificate after our side of
  // the handshake, and a frame written in between would count as sent and never be read, on
  // every redial. None is written before the consumer had the time to refuse.
  send_frames(gw.supplier_port, 0, 300);
  const double refusals = scrape_metric(gw.metrics_port, failures("tls_rejected"));
  BOOST_TEST(wait_metric(gw.metrics_port, failures("tls_rejected"), refusals + 2) >= refusals + 2);
  BOOST_TEST(sent(gw) == 0);
  BOOST_TEST(billing.count() == 0u);

  BOOST_TEST_REQUIRE(
      reload(gw,
             routes(billing.endpoint(), base + ", cert = " + quoted(p.at("gateway.crt")) +
                                            ", key = " + quoted(p.at("gateway.key"))),
             "success"));
  BOOST_TEST_REQUIRE(eventually([&] { return billing.handshakes() >= 1; }, 10s));
  send_frames(gw.supplier_port, 300, 500);
  BOOST_TEST_REQUIRE(billing.wait_for_count(500, 10s));  // the 300 that waited, then 200 more
  BOOST_TEST(billing.payloads().front() == "payload 0");
  BOOST_TEST(billing.payloads().back() == "payload 499");
  BOOST_TEST(sent(gw) == 500);
}

// (d) TLS against a plaintext consumer: it never answers the ClientHello, and the handshake's
// deadline (consumer_connect_timeout_ms) ends the dial with a reason that says so.
BOOST_AUTO_TEST_CASE(tls_against_a_plaintext_consumer_times_out_clearly) {
  pki p;
  asio::io_context ioc;
  // Listening, never accepting: the kernel completes the TCP handshake and nobody answers.
  asio::ip::tcp::acceptor plain(ioc, {asio::ip::make_address("127.0.0.1"), 0});
  const std::string endpoint = "127.0.0.1:" + std::to_string(plain.local_endpoint().port());
  const auto t0 = std::chrono::steady_clock::now();
  gateway_fixture gw(routes(endpoint, "ca = " + quoted(p.at("ca.crt"))),
                     "consumer_connect_timeout_ms = 400");
  BOOST_TEST(wait_metric(gw.metrics_port, failures("tls_timeout"), 1, 5s) >= 1);
  BOOST_TEST((std::chrono::steady_clock::now() - t0 < 5s));
  const auto line = gw.daemon->wait_for_log("timed out after 400 ms (is it speaking TLS?)", 2s);
  BOOST_TEST(line.has_value());
  BOOST_TEST(scrape_metric(gw.metrics_port, "gatewayd_consumer_connected{consumer=\"billing\"}") ==
             0);
}

// Answers every connection with an HTTP error and keeps it open: a peer that is not TLS.
class http_peer {
 public:
  http_peer() : acceptor_(ioc_, {asio::ip::make_address("127.0.0.1"), 0}) {
    acceptor_.non_blocking(true);
    thread_ = std::thread([this] { run(); });
  }
  ~http_peer() {
    stop_ = true;
    thread_.join();
  }
  std::string endpoint() const {
    return "127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
  }

 private:
  void run() {
    std::vector<asio::ip::tcp::socket> held;
    while (!stop_) {
      std::error_code ec;
      asio::ip::tcp::socket s(ioc_);
      acceptor_.accept(s, ec);
      if (ec) {
        std::this_thread::sleep_for(10ms);
        continue;
      }
      s.non_blocking(false, ec);
      asio::write(s, asio::buffer(std::string("HTTP/1.1 400 Bad Request\r\n\r\n")), ec);
      held.push_back(std::move(s));
    }
  }

  asio::io_context ioc_;
  asio::ip::tcp::acceptor acceptor_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// (d) Also when the plaintext peer answers, with something that is not TLS: refused at once.
BOOST_AUTO_TEST_CASE(tls_against_a_peer_speaking_something_else_is_not_tls) {
  pki p;
  http_peer peer;
  gateway_fixture gw(routes(peer.endpoint(), "ca = " + quoted(p.at("ca.crt"))));
  BOOST_TEST(wait_metric(gw.metrics_port, failures("tls_not_tls"), 1, 5s) >= 1);
  BOOST_TEST(gw.daemon->wait_for_log("does not speak TLS", 2s).has_value());
  BOOST_TEST(scrape_metric(gw.metrics_port, failures("tls_timeout")) == 0);
}

// (e) A reload whose tls block is wrong fails whole: the running table and connection stay.
BOOST_AUTO_TEST_CASE(a_bad_tls_block_on_reload_keeps_the_running_table) {
  pki p;
  tls_test_consumer billing(p, "billing", false);
  const std::string good =
      "ca = " + quoted(p.at("ca.crt")) + ", server_name = \"billing.internal\"";
  gateway_fixture gw(routes(billing.endpoint(), good));
  BOOST_TEST_REQUIRE(gw.consumers_connected({"billing"}));

  // A client certificate without its key: an error at the tls table's position.
  BOOST_TEST_REQUIRE(reload(
      gw, routes(billing.endpoint(), good + ", cert = " + quoted(p.at("gateway.crt"))), "failure"));
  BOOST_TEST(
      gw.daemon
          ->wait_for_log("routes.toml:3:7: consumers.billing.tls: cert and key go together", 5s)
          .has_value());
  BOOST_TEST(gw.daemon->wait_for_log("cert and key go together", 5s).has_value());
  // A CA that is not there.
  BOOST_TEST_REQUIRE(reload(gw, routes(billing.endpoint(), "ca = \"missing.crt\""), "failure"));
  BOOST_TEST(gw.daemon->wait_for_log("missing.crt", 5s).has_value());
  // A key that does not match the certificate.
  BOOST_TEST_REQUIRE(
      reload(gw,
             routes(billing.endpoint(), good + ", cert = " + quoted(p.at("gateway.crt")) +
                                            ", key = " + quoted(p.at("orders.key"))),
             "failure"));
  BOOST_TEST(gw.daemon->wait_for_log("does not match the certificate", 5s).has_value());

  send_frames(gw.supplier_port, 0, 300);
  BOOST_TEST_REQUIRE(billing.wait_for_count(300, 10s));
  BOOST_TEST(billing.handshakes() == 1u);  // never redialled
  BOOST_TEST(eventually([&] { return sent(gw) == 300; }, 5s));
}

// Rotation: a CA bundle rewritten in place (other bytes, same names) makes its consumer redial
// with a new context; a consumer whose TLS did not change keeps its connection.
BOOST_AUTO_TEST_CASE(a_rotated_file_redials_its_consumer_only) {
  pki p;
  tls_test_consumer billing(p, "billing", false);
  test_consumer audit;
  fs::copy_file(p.at("ca.crt"), p.at("bundle.crt"));
  gateway_fixture gw(routes(billing.endpoint(), "ca = " + quoted(p.at("bundle.crt")) +
                                                    ", server_name = \"billing.internal\"") +
                     consumer_toml("audit", audit.endpoint()) + route_toml("audit.>", {"audit"}));
  BOOST_TEST_REQUIRE(gw.consumers_connected({"billing", "audit"}));
  BOOST_TEST(billing.handshakes() == 1u);

  // The new bundle: the old CA and a second one, as in the middle of a CA rotation.
  p.dir.write("bundle.new",
              read_text(p.at("ca.crt").string()) + read_text(p.at("stranger-ca.crt").string()));
  fs::rename(p.at("bundle.new"), p.at("bundle.crt"));
  gw.daemon->signal(
      SIGHUP);  // the watcher may have reloaded already: then this one changes nothing
  BOOST_TEST_REQUIRE(eventually([&] { return billing.handshakes() == 2; }, 10s));
  // The old connection was closed by us, and said so.
  BOOST_TEST(eventually([&] { return billing.clean_closes() == 1; }, 5s));
  BOOST_TEST(billing.cut_closes() == 0u);
  BOOST_TEST(wait_metric(gw.metrics_port,
                         "gatewayd_consumer_disconnects_total{consumer=\"billing\",reason="
                         "\"endpoint_changed\"}",
                         1) == 1);
  send_frames(gw.supplier_port, 0, 50);
  BOOST_TEST_REQUIRE(billing.wait_for_count(50, 10s));
  BOOST_TEST(billing.handshakes() == 2u);
  BOOST_TEST(audit.connections() == 1u);
}

// The certificate checks name what failed: a stranger CA's certificate, an expired one.
BOOST_AUTO_TEST_CASE(an_unknown_ca_and_an_expired_certificate_are_told_apart) {
  pki p;
  tls_test_consumer rogue(p, "rogue", false);
  tls_test_consumer expired(p, "expired", false);
  const std::string tls =
      "tls = { ca = " + quoted(p.at("ca.crt")) + ", server_name = \"orders-svc\" }";
  gateway_fixture gw(consumer_toml("rogue", rogue.endpoint(), tls) +
                     consumer_toml("expired", expired.endpoint(), tls) +
                     route_toml("orders.>", {"rogue", "expired"}));
  const auto failures_of = [&](const std::string& consumer, const std::string& reason) {
    return "gatewayd_consumer_connect_failures_total{consumer=\"" + consumer + "\",reason=\"" +
           reason + "\"}";
  };
  BOOST_TEST(wait_metric(gw.metrics_port, failures_of("rogue", "tls_unknown_ca"), 1) >= 1);
  BOOST_TEST(wait_metric(gw.metrics_port, failures_of("expired", "tls_expired"), 1) >= 1);
  // Each consumer's failure has its own line, though both fail in the same second (each link
  // has its own log limit).
  const auto rogue_line = gw.daemon->wait_for_log("TLS handshake with consumer rogue", 2s);
  BOOST_TEST_REQUIRE(rogue_line.has_value());
  BOOST_TEST(rogue_line->find("is not signed by tls.ca") != std::string::npos, *rogue_line);
  const auto expired_line = gw.daemon->wait_for_log("TLS handshake with consumer expired", 2s);
  BOOST_TEST_REQUIRE(expired_line.has_value());
  BOOST_TEST(expired_line->find("is not valid now") != std::string::npos, *expired_line);
  BOOST_TEST(rogue.handshakes() == 0u);
  BOOST_TEST(expired.handshakes() == 0u);
}

// Refusals of what we offer are told apart from refusals of our certificate: a consumer that
// speaks TLS 1.1 only, or offers only CBC suites, answers our ClientHello with an alert
// (protocol_version, handshake_failure): tls_protocol, and the log names versions or suites.
// tls_rejected stays for the alerts about our certificate (test (c) above). Before: any alert
// from the consumer was tls_rejected ("does it want a client certificate?").
BOOST_AUTO_TEST_CASE(a_version_or_cipher_refusal_is_tls_protocol_not_tls_rejected) {
  pki p;
  tls_test_consumer old_tls(p, "billing", false, [](SSL_CTX* ctx) {
    SSL_CTX_set_security_level(ctx, 0);  // OpenSSL 3 allows TLS 1.1 at level 0 only
    SSL_CTX_set_min_proto_version(ctx, TLS1_1_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_1_VERSION);
  });
  tls_test_consumer cbc(p, "billing", false, [](SSL_CTX* ctx) {
    SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_cipher_list(ctx, "ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA384");
  });
  // TLS 1.2's way of saying "I want a client certificate": handshake_failure, after its own
  // certificate. Still tls_rejected.
  tls_test_consumer wants_cert(
      p, "billing", true, [](SSL_CTX* ctx) { SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION); });
  const std::string tls =
      "tls = { ca = " + quoted(p.at("ca.crt")) + ", server_name = \"billing.internal\" }";
  gateway_fixture gw(consumer_toml("old", old_tls.endpoint(), tls) +
                     consumer_toml("cbc", cbc.endpoint(), tls) +
                     consumer_toml("wants_cert", wants_cert.endpoint(), tls) +
                     route_toml("orders.>", {"old", "cbc", "wants_cert"}));
  const auto failures_of = [&](const std::string& consumer, const std::string& reason) {
    return "gatewayd_consumer_connect_failures_total{consumer=\"" + consumer + "\",reason=\"" +
           reason + "\"}";
  };
  BOOST_TEST(wait_metric(gw.metrics_port, failures_of("old", "tls_protocol"), 1) >= 1);
  BOOST_TEST(wait_metric(gw.metrics_port, failures_of("cbc", "tls_protocol"), 1) >= 1);
  BOOST_TEST(scrape_metric(gw.metrics_port, failures_of("old", "tls_rejected")) == 0);
  BOOST_TEST(scrape_metric(gw.metrics_port, failures_of("cbc", "tls_rejected")) == 0);
  const auto old_line = gw.daemon->wait_for_log("TLS handshake with consumer old", 2s);
  BOOST_TEST_REQUIRE(old_line.has_value());
  BOOST_TEST(old_line->find("refused our TLS versions, 1.2 and 1.3") != std::string::npos,
             *old_line);
  const auto cbc_line = gw.daemon->wait_for_log("TLS handshake with consumer cbc", 2s);
  BOOST_TEST_REQUIRE(cbc_line.has_value());
  BOOST_TEST(cbc_line->find("cipher suites") != std::string::npos, *cbc_line);
  BOOST_TEST(old_tls.handshakes() == 0u);
  BOOST_TEST(cbc.handshakes() == 0u);
  BOOST_TEST(wait_metric(gw.metrics_port, failures_of("wants_cert", "tls_rejected"), 1) >= 1);
  BOOST_TEST(scrape_metric(gw.metrics_port, failures_of("wants_cert", "tls_protocol")) == 0);
}

// A consumer whose certificate carries its name only as the subject CN, with no subjectAltName,
// is refused (tls_wrong_name, and the log says the CN is not checked), as browsers and Go's
// crypto/tls refuse it; the same name as a SAN is accepted. Before: OpenSSL fell back to the CN
// and the CN-only consumer got the frames.
BOOST_AUTO_TEST_CASE(a_name_in_the_subject_cn_only_is_refused) {
  pki p;
  tls_test_consumer cn_only(p, "cn-only", false);
  tls_test_consumer san(p, "billing", false);
  const std::string tls =
      "tls = { ca = " + quoted(p.at("ca.crt")) + ", server_name = \"billing.internal\" }";
  gateway_fixture gw(consumer_toml("legacy", cn_only.endpoint(), tls) +
                     consumer_toml("billing", san.endpoint(), tls) +
                     route_toml("orders.>", {"legacy", "billing"}));
  BOOST_TEST(wait_metric(gw.metrics_port,
                         "gatewayd_consumer_connect_failures_total{consumer=\"legacy\",reason="
                         "\"tls_wrong_name\"}",
                         1) >= 1);
  const auto line = gw.daemon->wait_for_log("TLS handshake with consumer legacy", 2s);
  BOOST_TEST_REQUIRE(line.has_value());
  BOOST_TEST(line->find("as a subjectAltName") != std::string::npos, *line);
  BOOST_TEST(line->find("CN is not checked") != std::string::npos, *line);
  BOOST_TEST_REQUIRE(gw.consumers_connected({"billing"}));
  send_frames(gw.supplier_port, 0, 20);
  BOOST_TEST(san.wait_for_count(20, 10s));
  BOOST_TEST(cn_only.count() == 0u);
  BOOST_TEST(cn_only.handshakes() == 0u);
  BOOST_TEST(scrape_metric(gw.metrics_port, "gatewayd_consumer_connected{consumer=\"legacy\"}") ==
             0);
}

// A TLS 1.2 consumer that, once connected, asks for a renegotiation (HelloRequest) and aborts
// with a handshake_failure alert when the gateway declines it (SSL_OP_NO_RENEGOTIATION): an
// alert on a connection that was up. Takes the gateway's connections one after another.
class renegotiating_consumer {
 public:
  explicit renegotiating_consumer(const pki& p)
      : ctx_(asio::ssl::context::tls_server),
        acceptor_(ioc_, {asio::ip::make_address("127.0.0.1"), 0}) {
    ctx_.use_certificate_chain_file(p.at("billing.crt").string());
    ctx_.use_private_key_file(p.at("billing.key").string(), asio::ssl::context::pem);
    SSL_CTX_set_max_proto_version(ctx_.native_handle(), TLS1_2_VERSION);
    acceptor_.non_blocking(true);
    thread_ = std::thread([this] { run(); });
  }
  ~renegotiating_consumer() {
    stop_ = true;
    thread_.join();
  }
  std::string endpoint() const {
    return "127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
  }
  std::size_t asked() const noexcept { return asked_.load(); }

 private:
  void run() {
    while (!stop_) {
      std::error_code ec;
      asio::ip::tcp::socket s(ioc_);
      acceptor_.accept(s, ec);
      if (ec) {
        std::this_thread::sleep_for(10ms);
        continue;
      }
      s.non_blocking(false, ec);
      // A read that waits at most 5 s: a gateway that never answers must not hold the peer.
      timeval limit{5, 0};
      ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
      SSL* ssl = SSL_new(ctx_.native_handle());
      SSL_set_fd(ssl, s.native_handle());
      if (SSL_accept(ssl) == 1 && SSL_renegotiate(ssl) == 1 && SSL_do_handshake(ssl) == 1) {
        ++asked_;
        // The gateway's answer (a no_renegotiation warning) makes OpenSSL abort the connection
        // with a handshake_failure alert; frames written meanwhile are read and dropped.
        char buf[4096];
        while (!stop_ && SSL_read(ssl, buf, sizeof buf) > 0) {
        }
      }
      SSL_free(ssl);
    }
  }

  asio::io_context ioc_;
  asio::ssl::context ctx_;
  asio::ip::tcp::acceptor acceptor_;
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> asked_{0};
  std::thread thread_;
};

// An alert on a connection that was up (a renegotiation the consumer asked for and the gateway
// declined) is a lost connection, counted as a disconnect and a TLS error from the peer, not a
// refusal of our certificate. Before: tls_rejected ("does it want a client certificate?").
BOOST_AUTO_TEST_CASE(an_alert_after_the_handshake_is_a_disconnect_not_tls_rejected) {
  pki p;
  renegotiating_consumer billing(p);
  gateway_fixture gw(routes(billing.endpoint(), "ca = " + quoted(p.at("ca.crt")) +
                                                    ", server_name = \"billing.internal\""));
  BOOST_TEST_REQUIRE(eventually([&] { return billing.asked() >= 1; }, 10s));
  BOOST_TEST(wait_metric(gw.metrics_port,
                         "gatewayd_consumer_disconnects_total{consumer=\"billing\",reason="
                         "\"error\"}",
                         1) >= 1);
  BOOST_TEST(wait_metric(gw.metrics_port,
                         "gatewayd_tls_errors_total{leg=\"consumer\",reason=\"peer_alert\"}",
                         1) >= 1);
  BOOST_TEST(scrape_metric(gw.metrics_port, failures("tls_rejected")) == 0);
}
