// Revoking supplier certificates with [tls] crl, through the real daemon: a PKI made by the test
// with the openssl CLI (`openssl ca -revoke`, `-gencrl`, as an operator runs them). A revoked
// certificate is refused at its handshake; one revoked while its session is open is closed by
// the next reload and counted; the others stream on; a stale CRL is used and said, not an
// outage; a bad CRL keeps the running one. A consumer's tls.crl revokes consumers the same way.
#include <boost/test/unit_test.hpp>

#include <sys/wait.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>

#include "tests/support/binaries.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"
#include "tests/support/tls_consumer_peer.hpp"
#include "tests/support/tls_peers.hpp"

using namespace gatewayd::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// The test CA's revocation side: `openssl ca` with a minimal configuration and its own database
// in the PKI's folder.
struct revocations {
  std::string dir;

  explicit revocations(const pki& p) : dir(p.dir.path().string()) {
    std::ofstream(p.at("crl-ca.cnf")) << "[ca]\ndefault_ca = d\n[d]\ndatabase = index.txt\n"
                                         "crlnumber = crlnumber\ndefault_md = sha256\n"
                                         "default_crl_days = 30\n";
    std::ofstream(p.at("index.txt")) << "";
    std::ofstream(p.at("crlnumber")) << "01\n";
  }

  void revoke(const std::string& cert) {
    sh("cd " + dir + " && openssl ca -config crl-ca.cnf -keyfile ca.key -cert ca.crt -revoke " +
       cert + ".crt");
  }

  // Publishes the CRL as a deploy does: written beside `file`, renamed over it.
  void publish(const std::string& file, const std::string& options = "") {
    sh("cd " + dir + " && openssl ca -config crl-ca.cnf -keyfile ca.key -cert ca.crt -gencrl " +
       options + " -out " + file + ".tmp && mv " + file + ".tmp " + file);
  }
};

std::string with_crl(const pki& p) {
  return p.tls_table(true, "crl = \"" + p.at("ca.crl").string() + "\"\n");
}

std::string routes(const test_consumer& sink) {
  return consumer_toml("sink", sink.endpoint()) + route_toml("stream.>", {"sink"}) +
         "[suppliers_default]\npublish = [\">\"]\n";
}

std::string failures(const std::string& reason) {
  return "gatewayd_supplier_tls_handshake_failures_total{reason=\"" + reason + "\"}";
}

const std::string revoked_closes =
    R"(gatewayd_supplier_connections_closed_total{reason="revoked"})";

// Frames the sink got from supplier `sender` (its address is stream.SENDER).
std::size_t from(const test_consumer& sink, std::uint16_t sender) {
  const std::string address = "stream." + std::to_string(sender);
  std::size_t n = 0;
  for (const auto& f : sink.frames())
    n += f.address == address;
  return n;
}

// `gatewayd --check` on the fixture's configuration: its exit status and what it printed.
std::pair<int, std::string> check(const gateway_fixture& gw) {
  const std::string command = gatewayd_binary() + " --check --config " + gw.config_path() + " 2>&1";
  std::FILE* out = ::popen(command.c_str(), "r");
  BOOST_TEST_REQUIRE(out != nullptr);
  std::string said;
  for (char buf[512]; std::fgets(buf, sizeof buf, out);)
    said += buf;
  const int status = ::pclose(out);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, said};
}

// A new handshake with `cert`: refused (at the handshake, or on the first read under TLS 1.3,
// whose client finishes before the server judged its certificate).
bool refused(const pki& p, const std::string& cert, unsigned short port) {
  tls_supplier s(p, cert);
  return s.connect(port) || s.refused_on_read();
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_revoked_certificate_is_refused_at_the_handshake) {
  pki p;
  revocations ca(p);
  ca.revoke("orders");
  ca.publish("ca.crl");
  test_consumer sink;
  gateway_fixture gw(routes(sink), "", {}, true, with_crl(p));
  BOOST_TEST(gw.daemon->wait_for_log("[tls] crl: every certificate of the chain", 5s).has_value());

  BOOST_TEST(refused(p, "orders", gw.supplier_port));
  BOOST_TEST(wait_metric(gw.metrics_port, failures("revoked"), 1) == 1);
  BOOST_TEST(gw.daemon->wait_for_log("TLS handshake failed (revoked)", 5s).has_value());

  streaming_supplier billing(p, "billing", 2, gw.supplier_port);
  BOOST_TEST(eventually([&] { return from(sink, 2) >= 100; }, 10s));
  billing.halt();
  BOOST_TEST(!billing.failed.load());
  BOOST_TEST(scrape_metric(gw.metrics_port, revoked_closes) == 0);
}

// The CRL grows while both suppliers stream: the reload (SIGHUP; the watcher may see the file
// first, which is the same reload) closes the revoked one's session and counts it; the other
// keeps streaming and loses nothing, and the revoked one cannot come back.
BOOST_AUTO_TEST_CASE(a_certificate_revoked_while_open_is_closed_by_the_reload) {
  pki p;
  revocations ca(p);
  ca.publish("ca.crl");  // nothing revoked yet
  test_consumer sink;
  gateway_fixture gw(routes(sink), "", {}, true, with_crl(p));
  streaming_supplier orders(p, "orders", 1, gw.supplier_port);
  streaming_supplier billing(p, "billing", 2, gw.supplier_port);
  BOOST_TEST_REQUIRE(eventually([&] { return from(sink, 1) >= 50 && from(sink, 2) >= 50; }, 10s));

  ca.revoke("orders");
  ca.publish("ca.crl");
  gw.daemon->signal(SIGHUP);
  BOOST_TEST(wait_metric(gw.metrics_port, revoked_closes, 1, 10s) == 1);
  const auto said = gw.daemon->wait_for_log("closing the connection (revoked)", 5s);
  BOOST_TEST_REQUIRE(said.has_value());
  BOOST_TEST(said->find("identity \"orders-svc\"") != std::string::npos, *said);
  BOOST_TEST(eventually([&] { return orders.failed.load(); }, 10s));

  const std::size_t billed = from(sink, 2);
  BOOST_TEST(eventually([&] { return from(sink, 2) >= billed + 100; }, 10s));
  billing.halt();
  BOOST_TEST(!billing.failed.load());
  BOOST_TEST(eventually([&] { return from(sink, 2) == billing.sent.load(); }, 10s),
             from(sink, 2) << " of " << billing.sent.load());
  BOOST_TEST(scrape_metric(gw.metrics_port, revoked_closes) == 1);  // billing was not
  BOOST_TEST(refused(p, "orders", gw.supplier_port));
  BOOST_TEST(wait_metric(gw.metrics_port, failures("revoked"), 1) == 1);
  BOOST_TEST(sink.corruptions() == 0u);
}

// A CRL past its nextUpdate (the CA's publisher stopped) is still used: what it revokes stays
// refused, every other supplier gets in, and the log and the gauge say it is stale.
BOOST_AUTO_TEST_CASE(a_stale_crl_is_used_and_said_not_an_outage) {
  pki p;
  revocations ca(p);
  ca.revoke("orders");
  ca.publish("ca.crl", "-crl_lastupdate 20200101000000Z -crl_nextupdate 20200201000000Z");
  test_consumer sink;
  gateway_fixture gw(routes(sink), "", {}, true, with_crl(p));
  const auto warned = gw.daemon->wait_for_log("past its nextUpdate", 5s);
  BOOST_TEST_REQUIRE(warned.has_value());
  BOOST_TEST(warned->find(p.at("ca.crl").string()) != std::string::npos, *warned);
  const std::string gauge = "gatewayd_tls_crl_next_update_timestamp_seconds{file=\"" +
                            p.at("ca.crl").string() + "\",issuer=\"/CN=ca\"}";
  BOOST_TEST(scrape_metric(gw.metrics_port, gauge) == 1580515200.0);  // 2020-02-01T00:00:00Z
  const auto [status, said] = check(gw);
  BOOST_TEST(status == 0, said);
  BOOST_TEST(said.find(gw.config_path() + ": warning: tls.crl: the CRL of /CN=ca in " +
                       p.at("ca.crl").string() + " is past its nextUpdate") != std::string::npos,
             said);

  BOOST_TEST(refused(p, "orders", gw.supplier_port));
  BOOST_TEST(wait_metric(gw.metrics_port, failures("revoked"), 1) == 1);
  streaming_supplier billing(p, "billing", 2, gw.supplier_port);
  BOOST_TEST(eventually([&] { return from(sink, 2) >= 100; }, 10s));
  billing.halt();
  BOOST_TEST(!billing.failed.load());
  BOOST_TEST(scrape_metric(gw.metrics_port, failures("bad_certificate")) == 0);
}

// A CRL file that no longer parses fails the reload as a bad certificate does: the running CRL
// stays (still refusing the revoked certificate), and --check names the file.
BOOST_AUTO_TEST_CASE(a_bad_crl_keeps_the_running_one) {
  pki p;
  revocations ca(p);
  ca.revoke("orders");
  ca.publish("ca.crl");
  test_consumer sink;
  gateway_fixture gw(routes(sink), "", {}, true, with_crl(p));
  BOOST_TEST_REQUIRE(refused(p, "orders", gw.supplier_port));

  std::string crl;
  {
    std::ifstream in(p.at("ca.crl"));
    crl.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::ofstream(p.at("ca.crl.tmp")) << crl.substr(0, crl.size() / 2);  // cut in the middle
  fs::rename(p.at("ca.crl.tmp"), p.at("ca.crl"));
  gw.daemon->signal(SIGHUP);
  const auto error = gw.daemon->wait_for_log("not a PEM CRL file", 10s);
  BOOST_TEST_REQUIRE(error.has_value());
  BOOST_TEST(error->find(p.at("ca.crl").string()) != std::string::npos, *error);
  BOOST_TEST(gw.daemon->wait_for_log("failed with 1 configuration error", 10s).has_value());

  BOOST_TEST(refused(p, "orders", gw.supplier_port));
  BOOST_TEST(wait_metric(gw.metrics_port, failures("revoked"), 2) == 2);
  streaming_supplier billing(p, "billing", 2, gw.supplier_port);
  BOOST_TEST(eventually([&] { return from(sink, 2) >= 100; }, 10s));
  billing.halt();
  BOOST_TEST(!billing.failed.load());

  const auto [status, said] = check(gw);
  BOOST_TEST(status == 1, said);
  BOOST_TEST(said.find(gw.config_path() + ": [tls] " + p.at("ca.crl").string() +
                       ": not a PEM CRL file") != std::string::npos,
             said);
}

// The consumer leg: the gateway verifies a consumer's certificate against its tls.ca, and its
// tls.crl revokes it the same way. The CRL is part of the consumer's TLS digest: the reload that
// reads a new one redials the consumer, and the dial refuses the revoked certificate.
BOOST_AUTO_TEST_CASE(a_revoked_consumer_is_dropped_by_the_reload_and_refused_at_the_dial) {
  pki p;
  revocations ca(p);
  ca.publish("ca.crl");
  tls_test_consumer billing(p, "billing", false);
  gateway_fixture gw(consumer_toml("billing", billing.endpoint(),
                                   "tls = { ca = \"" + p.at("ca.crt").string() +
                                       "\", server_name = \"billing.internal\", crl = \"" +
                                       p.at("ca.crl").string() + "\" }") +
                     route_toml("orders.>", {"billing"}));
  BOOST_TEST_REQUIRE(gw.consumers_connected({"billing"}));
  BOOST_TEST(billing.handshakes() == 1u);

  ca.revoke("billing");
  ca.publish("ca.crl");
  gw.daemon->signal(SIGHUP);
  const std::string refused =
      R"(gatewayd_consumer_connect_failures_total{consumer="billing",reason="tls_bad_certificate"})";
  BOOST_TEST(wait_metric(gw.metrics_port, refused, 1, 10s) >= 1);
  BOOST_TEST(gw.daemon->wait_for_log("revoked by tls.crl", 5s).has_value());
  BOOST_TEST(scrape_metric(gw.metrics_port, R"(gatewayd_consumer_connected{consumer="billing"})") ==
             0);
}
