#include "tests/support/haproxy.hpp"

#include <boost/test/unit_test.hpp>
#include <sstream>
#include <vector>

#include "tests/support/http_get.hpp"
#include "tests/support/test_peers.hpp"

using namespace std::chrono_literals;

namespace gatewayd::test {

std::string server_status(unsigned short stats_port, const std::string& name) {
  std::istringstream csv(http_get(stats_port, "/stats;csv", 2s).body);
  for (std::string line; std::getline(csv, line);) {
    std::vector<std::string> f;
    std::stringstream fields(line);
    for (std::string x; std::getline(fields, x, ',');)
      f.push_back(x);
    if (f.size() > 17 && f[0] == "gatewayd_nodes" && f[1] == name) return f[17];
  }
  return "";
}

std::string haproxy_config(unsigned short front, unsigned short stats, const gateway_fixture& n1,
                           const gateway_fixture& n2) {
  std::string cfg = read_text(GATEWAYD_SOURCE_DIR "/etc/haproxy.cfg");
  const auto swap = [&cfg](const std::string& from, const std::string& to) {
    BOOST_TEST_REQUIRE(cfg.find(from) != std::string::npos, "etc/haproxy.cfg has no " << from);
    replace_all(cfg, from, to);
  };
  for (const char* kept : {"mode tcp", "option httpchk GET /readyz", "http-check expect status 200",
                           "send-proxy-v2", "balance leastconn", "option redispatch"}) {
    BOOST_TEST_REQUIRE(cfg.find(kept) != std::string::npos, "etc/haproxy.cfg has no " << kept);
  }
  swap("log /dev/log local0", "log stdout format raw local0");
  swap("maxconn 20000", "maxconn 1000");
  swap("bind :7400", "bind 127.0.0.1:" + std::to_string(front));
  swap("inter 500ms fall 2 rise 2", "inter 100ms fall 2 rise 2");
  const auto server = [](const gateway_fixture& n) {
    return "127.0.0.1:" + std::to_string(n.supplier_port) + " check port " +
           std::to_string(n.metrics_port);
  };
  swap("10.0.0.11:7400 check port 9464", server(n1));
  swap("10.0.0.12:7400 check port 9464", server(n2));
  swap("bind 127.0.0.1:8404", "bind 127.0.0.1:" + std::to_string(stats));
  return cfg;
}

}  // namespace gatewayd::test
