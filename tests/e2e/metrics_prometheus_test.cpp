#include <boost/test/unit_test.hpp>

#include <asio.hpp>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <thread>

#include "tests/support/gateway_fixture.hpp"
#include "tests/support/http_get.hpp"
#include "tests/support/test_peers.hpp"

using namespace gatewayd::test;
using namespace std::chrono_literals;

namespace {

const char* const prometheus_binary = "/usr/bin/prometheus";  // Debian package prometheus

// etc/prometheus.yml (and the alert rules it loads) pointed at the test gateway, scraped every
// second by a real Prometheus server on a free port.
struct prometheus_server {
  temp_dir dir;
  unsigned short port = free_port();
  std::unique_ptr<daemon_process> process;

  explicit prometheus_server(unsigned short metrics_port) {
    BOOST_TEST_REQUIRE(metrics_port != 0);
    BOOST_TEST_REQUIRE(std::filesystem::exists(prometheus_binary), "install Debian's prometheus");
    const std::filesystem::path etc = std::filesystem::path(GATEWAYD_SOURCE_DIR) / "etc";
    std::string config = read_text(etc / "prometheus.yml");
    BOOST_TEST_REQUIRE(config.find("127.0.0.1:9464") != std::string::npos);
    replace_all(config, "127.0.0.1:9464", "127.0.0.1:" + std::to_string(metrics_port));
    replace_all(config, "scrape_interval: 15s", "scrape_interval: 1s");
    replace_all(config, "evaluation_interval: 15s", "evaluation_interval: 1s");
    replace_all(config, "scrape_timeout: 5s", "scrape_timeout: 1s");
    const auto config_file = dir.write("prometheus.yml", config);
    dir.write("gatewayd_alerts.yml", read_text(etc / "gatewayd_alerts.yml"));
    process = std::make_unique<daemon_process>(
        prometheus_binary,
        std::vector<std::string>{"--config.file=" + config_file.string(),
                                 "--storage.tsdb.path=" + (dir.path() / "data").string(),
                                 "--web.listen-address=127.0.0.1:" + std::to_string(port),
                                 "--log.level=warn"},
        dir.path() / "prometheus.log");
    BOOST_TEST_MESSAGE("prometheus pid " << process->pid() << " on port " << port);
  }
  ~prometheus_server() {
    process->signal(SIGTERM);
    BOOST_TEST(process->wait_exit(10s).has_value());
  }

  // The body of an instant query (PromQL, URL-encoded by the caller).
  std::string query(const std::string& encoded) const {
    return http_get(port, "/api/v1/query?query=" + encoded, 2s).body;
  }
  // Waits until the query's answer contains `needle` (Prometheus stays up meanwhile).
  bool wait_for(const std::string& encoded, const std::string& needle, std::string& last) {
    return eventually(
        [&] {
          if (!process->running()) return true;  // reported by the caller, with the log
          last = query(encoded);
          return last.find(needle) != std::string::npos;
        },
        25s);
  }
};

// A gateway with one consumer, and a Prometheus server scraping it.
struct scraped_gateway {
  test_consumer c;
  gateway_fixture gw{consumer_toml("c", c.endpoint()) + route_toml("a.>", {"c"})};
  prometheus_server prometheus{gw.metrics_port};
};

}  // namespace

// The gateway's series is read back through Prometheus's HTTP API.
BOOST_FIXTURE_TEST_CASE(real_prometheus_scrapes_the_gateway, scraped_gateway) {
  std::string body;
  const bool scraped =
      prometheus.wait_for("gatewayd_build_info", "\"__name__\":\"gatewayd_build_info\"", body);
  BOOST_TEST(scraped, "last answer: " << body << "\nprometheus log:\n"
                                      << prometheus.process->log());
  BOOST_TEST(body.find("\"job\":\"gatewayd\"") != std::string::npos, body);
  BOOST_TEST(body.find("\"version\":\"") != std::string::npos, body);

  const auto up = prometheus.query("up%7Bjob%3D%22gatewayd%22%7D");
  BOOST_TEST(up.find(",\"1\"]") != std::string::npos, up);
  // The alert rules etc/prometheus.yml names loaded and evaluate without error.
  const auto rules = http_get(prometheus.port, "/api/v1/rules", 2s).body;
  BOOST_TEST(rules.find("GatewaydConsumerQueueNearCapacity") != std::string::npos, rules);
  BOOST_TEST(rules.find("\"health\":\"err\"") == std::string::npos, rules);
}

// Slowloris on the metrics port: a client holds 12 connections to /metrics, each trickling
// a request that never ends, one byte every 100 ms, and opens a new one whenever the gateway
// drops one. Every scrape Prometheus makes meanwhile (each second, 1 s timeout) must succeed.
BOOST_FIXTURE_TEST_CASE(scrapes_keep_succeeding_while_a_slow_client_holds_connections,
                        scraped_gateway) {
  std::string body;
  BOOST_TEST_REQUIRE(prometheus.wait_for("up%7Bjob%3D%22gatewayd%22%7D", ",\"1\"]", body), body);

  constexpr int slow_connections = 12;
  std::atomic<bool> stop{false};
  std::atomic<int> reopened{0};
  std::vector<std::thread> slow;
  for (int i = 0; i < slow_connections; ++i) {
    slow.emplace_back([&] {
      asio::io_context ioc;
      const std::string request = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
      while (!stop) {
        asio::ip::tcp::socket s(ioc);
        std::error_code ec;
        s.connect({asio::ip::address_v4::loopback(), gw.metrics_port}, ec);
        for (std::size_t at = 0; !ec && !stop; ++at) {
          const char byte = at < request.size() ? request[at] : 'x';
          asio::write(s, asio::buffer(&byte, 1), ec);
          std::this_thread::sleep_for(100ms);
        }
        if (!stop) ++reopened;
      }
    });
  }
  constexpr auto window = 10s;
  std::this_thread::sleep_for(window);
  // Over the window: how many scrapes ran, and the worst of them (up is 0 for a failed one).
  const std::string range = "%5B" + std::to_string(window.count()) + "s%5D";
  const auto count = prometheus.query("count_over_time(up%7Bjob%3D%22gatewayd%22%7D" + range + ")");
  const auto worst = prometheus.query("min_over_time(up%7Bjob%3D%22gatewayd%22%7D" + range + ")");
  stop = true;
  for (auto& t : slow)
    t.join();
  BOOST_TEST_MESSAGE("scrapes in the last " << window.count() << " s: " << count << "\nworst: "
                                            << worst << "\nslow connections dropped by the "
                                            << "gateway and reopened: " << reopened.load());
  static const std::regex value(R"re(,"(\d+)"\])re");
  std::smatch m;
  BOOST_TEST_REQUIRE(std::regex_search(count, m, value), count);
  BOOST_TEST(std::stoi(m[1]) >= 7, count);
  BOOST_TEST(worst.find(",\"1\"]") != std::string::npos, "a scrape failed: " << worst);
}
