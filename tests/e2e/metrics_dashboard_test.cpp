#include <boost/test/unit_test.hpp>

#include <cstdlib>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/gateway_fixture.hpp"
#include "tests/support/http_get.hpp"
#include "tests/support/test_peers.hpp"

using namespace gatewayd::test;
using namespace std::chrono_literals;

namespace {

const std::filesystem::path source = GATEWAYD_SOURCE_DIR;
const std::filesystem::path dashboard = source / "etc/grafana/dashboards/gatewayd.json";

std::string quoted(const std::filesystem::path& p) {
  std::string q = "'";
  q += p.string();
  q += "'";
  return q;
}

// tests/grafana/check_queries.py on `dash` (and the alert rules) against `exposition`.
command_result check(const std::filesystem::path& exposition, const std::filesystem::path& dash) {
  // Built by appending: GCC 12 warns falsely (-Wrestrict) on chains of string operator+.
  std::string cmd = "python3 ";
  for (const auto& part : {quoted(source / "tests/grafana/check_queries.py"), quoted(exposition),
                           std::string("--dashboard"), quoted(dash), std::string("--rules"),
                           quoted(source / "etc/gatewayd_alerts.yml")}) {
    cmd += part;
    cmd += ' ';
  }
  return run_command("/bin/sh", {"-c", cmd}, 60s);
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A real exposition of the running gateway after some traffic.
struct scraped_gateway {
  test_consumer consumer;
  // An ack = true consumer, so that its families (unacked, redelivered, max_unacked_bytes, ack
  // protocol errors) have samples: they exist for such consumers only.
  test_consumer acked;
  // A consumer with a spool, for the spool families (they exist for such consumers only).
  test_consumer spooled;
  gateway_fixture gw{
      consumer_toml("c", consumer.endpoint()) +
          consumer_toml("acked", acked.endpoint(), "ack = true\n") +
          consumer_toml("spooled", spooled.endpoint(), "spool_max_bytes = 1048576\n") +
          route_toml("a.>", {"c"}) + route_toml("b.>", {"acked"}) + route_toml("s.>", {"spooled"}),
      "spool_dir = \"spool\"\n"};
  std::filesystem::path exposition;

  scraped_gateway() {
    BOOST_TEST_REQUIRE(consumer.wait_for_connections(1, 10s));
    test_supplier s(gw.supplier_port);
    for (int i = 0; i < 50; ++i)
      s.send_frame("a.b", "payload");
    BOOST_TEST_REQUIRE(consumer.wait_for_count(50, 10s));
    const auto r = http_get(gw.metrics_port, "/metrics");
    BOOST_TEST_REQUIRE(r.status == 200);
    // The TLS series have samples only with [tls]: a second gateway with a self-signed
    // certificate lends its gatewayd_tls_* lines.
    const auto crt = gw.dir.path() / "tls.crt";
    const auto key = gw.dir.path() / "tls.key";
    const std::string make =
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
        "-nodes -days 30 -subj /CN=gateway.test -keyout " +
        key.string() + " -out " + crt.string() + " >/dev/null 2>&1";
    BOOST_TEST_REQUIRE(std::system(make.c_str()) == 0);
    gateway_fixture tls_gw{
        route_toml("a.>", {"c"}) + consumer_toml("c", consumer.endpoint()),
        "",
        {},
        true,
        "\n[tls]\ncert = \"" + crt.string() + "\"\nkey = \"" + key.string() + "\"\n"};
    const auto t = http_get(tls_gw.metrics_port, "/metrics");
    BOOST_TEST_REQUIRE(t.status == 200);
    std::string body = r.body;
    std::istringstream lines(t.body);
    for (std::string line; std::getline(lines, line);) {
      if (line.find("gatewayd_tls_") != std::string::npos) body += line + "\n";
    }
    exposition = gw.dir.write("exposition.txt", body);
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(every_dashboard_and_alert_query_parses_and_uses_exported_metrics) {
  scraped_gateway g;
  const auto r = check(g.exposition, dashboard);
  BOOST_TEST(r.exit_code == 0, r.out << r.err);
  BOOST_TEST(r.out.find("OK: ") != std::string::npos, r.out << r.err);
}

// What the issue found missing: no panel queried a confirm, ack, redelivery or TLS series. Each
// of these families is on some panel (the check above proves they parse and are exported).
BOOST_AUTO_TEST_CASE(the_dashboard_shows_confirms_acks_and_tls) {
  const std::string json = read_file(dashboard);
  for (const char* family :
       {"gatewayd_supplier_confirmed_frames_total", "gatewayd_supplier_rejected_frames_total",
        "gatewayd_supplier_unconfirmed_frames", "gatewayd_consumer_unacked_frames",
        "gatewayd_consumer_unacked_bytes", "gatewayd_consumer_max_unacked_bytes",
        "gatewayd_consumer_redelivered_frames_total", "gatewayd_consumer_protocol_errors_total",
        "gatewayd_tls_connections", "gatewayd_tls_errors_total",
        "gatewayd_supplier_tls_handshakes_total", "gatewayd_supplier_tls_handshake_failures_total",
        "gatewayd_tls_certificate_expiry_timestamp_seconds",
        "gatewayd_supplier_backpressure_pauses_total"}) {
    BOOST_TEST(json.find(std::string(family) + "{") != std::string::npos, family);
  }
}

// The check itself must be able to fail: a misspelt metric and a query that does not parse.
BOOST_AUTO_TEST_CASE(the_check_rejects_unknown_metrics_and_bad_promql) {
  scraped_gateway g;
  std::string json = read_file(dashboard);
  const std::string good = "gatewayd_lf_threads{";
  BOOST_TEST_REQUIRE(json.find(good) != std::string::npos);
  std::string misspelt = json;
  misspelt.replace(misspelt.find(good), good.size(), "gatewayd_lf_thread{");
  const auto r1 = check(g.exposition, g.gw.dir.write("misspelt.json", misspelt));
  BOOST_TEST(r1.exit_code == 1, r1.exit_code << r1.out << r1.err);
  BOOST_TEST(r1.out.find("gatewayd_lf_thread is not in the exposition") != std::string::npos,
             r1.out);

  std::string broken = json;
  const std::string q = "histogram_quantile(0.99,";
  BOOST_TEST_REQUIRE(broken.find(q) != std::string::npos);
  broken.replace(broken.find(q), q.size(), "histogram_quantile(0.99 sum");
  const auto r2 = check(g.exposition, g.gw.dir.write("broken.json", broken));
  BOOST_TEST(r2.exit_code == 1, r2.exit_code << r2.out << r2.err);
  BOOST_TEST(r2.out.find("promtool check rules failed") != std::string::npos, r2.out);
}
