#define BOOST_TEST_MODULE metrics_prometheus
#include <boost/test/unit_test.hpp>

#include <asio.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/gateway_fixture.hpp"
#include "tests/support/http_get.hpp"
#include "tests/support/test_peers.hpp"

using namespace gatewayd::test;
using namespace std::chrono_literals;

namespace {

const char* const prometheus_binary = "/usr/bin/prometheus";  // Debian package prometheus

}  // namespace

// etc/prometheus.yml (and the alert rules it loads), pointed at the test gateway, scraped by a
// real Prometheus server; the gateway's series is read back through Prometheus's HTTP API.
BOOST_AUTO_TEST_CASE(real_prometheus_scrapes_the_gateway) {
  BOOST_TEST_REQUIRE(std::filesystem::exists(prometheus_binary), "install Debian's prometheus");
  test_consumer c;
  gateway_fixture gw(consumer_toml("c", c.endpoint()) + route_toml("a.>", {"c"}));
  BOOST_TEST_REQUIRE(gw.metrics_port != 0);

  const std::filesystem::path etc = std::filesystem::path(GATEWAYD_SOURCE_DIR) / "etc";
  std::string config = read_text(etc / "prometheus.yml");
  BOOST_TEST_REQUIRE(config.find("127.0.0.1:9464") != std::string::npos);
  replace_all(config, "127.0.0.1:9464", "127.0.0.1:" + std::to_string(gw.metrics_port));
  replace_all(config, "scrape_interval: 15s", "scrape_interval: 1s");
  replace_all(config, "evaluation_interval: 15s", "evaluation_interval: 1s");
  replace_all(config, "scrape_timeout: 5s", "scrape_timeout: 1s");
  temp_dir dir;
  const auto config_file = dir.write("prometheus.yml", config);
  dir.write("gatewayd_alerts.yml", read_text(etc / "gatewayd_alerts.yml"));

  const unsigned short port = free_port();
  daemon_process prometheus(
      prometheus_binary,
      {"--config.file=" + config_file.string(),
       "--storage.tsdb.path=" + (dir.path() / "data").string(),
       "--web.listen-address=127.0.0.1:" + std::to_string(port), "--log.level=warn"},
      dir.path() / "prometheus.log");
  BOOST_TEST_MESSAGE("prometheus pid " << prometheus.pid() << " on port " << port);

  std::string body;
  const bool scraped = eventually(
      [&] {
        if (!prometheus.running()) return true;  // reported below, with its log
        body = http_get(port, "/api/v1/query?query=gatewayd_build_info", 2s).body;
        return body.find("\"__name__\":\"gatewayd_build_info\"") != std::string::npos;
      },
      25s);
  BOOST_TEST(scraped, "last answer: " << body << "\nprometheus log:\n" << prometheus.log());
  BOOST_TEST(body.find("\"job\":\"gatewayd\"") != std::string::npos, body);
  BOOST_TEST(body.find("\"version\":\"") != std::string::npos, body);

  const auto up = http_get(port, "/api/v1/query?query=up%7Bjob%3D%22gatewayd%22%7D", 2s).body;
  BOOST_TEST(up.find(",\"1\"]") != std::string::npos, up);
  // The alert rules etc/prometheus.yml names loaded and evaluate without error.
  const auto rules = http_get(port, "/api/v1/rules", 2s).body;
  BOOST_TEST(rules.find("GatewaydConsumerQueueNearCapacity") != std::string::npos, rules);
  BOOST_TEST(rules.find("\"health\":\"err\"") == std::string::npos, rules);

  prometheus.signal(SIGTERM);
  BOOST_TEST(prometheus.wait_exit(10s).has_value());
}
