#include "tests/support/gateway_fixture.hpp"

#include <fstream>
#include <stdexcept>

namespace gatewayd::test {

gateway_fixture::gateway_fixture(const std::string& routes, const std::string& gateway_extra,
                                 const std::vector<std::string>& env, bool metrics) {
  dir.write("routes.toml", routes);
  dir.write("gatewayd.toml",
            "[gateway]\nsupplier_listen = \"127.0.0.1:0\"\nthreads = 2\n"
            "routes_file = \"routes.toml\"\n" +
                gateway_extra + "\n[metrics]\nlisten = \"127.0.0.1:0\"\n" +
                (metrics ? "" : "enabled = false\n"));
  daemon = std::make_unique<daemon_process>(GATEWAYD_BINARY,
                                            std::vector<std::string>{"--config", config_path()},
                                            dir.path() / "gatewayd.log", env);
  const auto line = daemon->wait_for_log("listening for suppliers on", std::chrono::seconds(10));
  if (!line) throw std::runtime_error("gatewayd did not start:\n" + daemon->log());
  supplier_port = port_in(*line);
  if (metrics) {
    if (const auto m = daemon->wait_for_log("metrics on", std::chrono::seconds(5))) {
      metrics_port = port_in(*m);
    }
  }
}

gateway_fixture::~gateway_fixture() = default;

namespace {
long status_field(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}
}  // namespace

long gateway_fixture::rss_kib() const {
  return status_field(daemon->pid(), "VmRSS");
}
long gateway_fixture::peak_rss_kib() const {
  return status_field(daemon->pid(), "VmHWM");
}

std::string consumer_toml(const std::string& name, const std::string& endpoint,
                          const std::string& extra) {
  return "[consumers." + name + "]\nendpoint = \"" + endpoint + "\"\n" + extra + "\n";
}

std::string route_toml(const std::string& match, const std::vector<std::string>& to) {
  std::string s = "[[routes]]\nmatch = \"" + match + "\"\nto = [";
  for (std::size_t i = 0; i < to.size(); ++i)
    s += (i ? ", \"" : "\"") + to[i] + "\"";
  return s + "]\n";
}

}  // namespace gatewayd::test
