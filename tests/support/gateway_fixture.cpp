#include "tests/support/gateway_fixture.hpp"

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tests/support/binaries.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"

namespace gatewayd::test {

namespace {

// The port of `"key": "HOST:PORT"` in a ports file, 0 when absent (or null).
unsigned short port_of(const std::string& json, const std::string& key) {
  const std::regex re("\"" + key + "\": \"[^\"]*:([0-9]+)\"");
  std::smatch m;
  return std::regex_search(json, m, re) ? static_cast<unsigned short>(std::stoi(m[1])) : 0;
}

// The ports file once the daemon `pid` has written it (a file left by a killed predecessor
// names another pid), or nothing after `timeout` or when the daemon ended.
std::optional<std::string> read_ports_file(const std::filesystem::path& path,
                                           daemon_process& daemon,
                                           std::chrono::milliseconds timeout) {
  const std::string pid = "{\"pid\": " + std::to_string(daemon.pid()) + ",";
  std::optional<std::string> json;
  eventually(
      [&] {
        std::ifstream in(path);
        std::stringstream text;
        text << in.rdbuf();
        if (text.str().rfind(pid, 0) == 0) json = text.str();
        return json.has_value() || !daemon.running();
      },
      timeout);
  return json;
}

}  // namespace

long memory_slack() {
  return instrumented() ? 4 : 1;
}

int peer_slowdown() {
  return instrumented() ? 10 : 1;
}

gateway_fixture::gateway_fixture(const std::string& routes, const std::string& gateway_extra,
                                 const std::vector<std::string>& env, bool metrics,
                                 const std::string& tables) {
  dir.write("routes.toml", routes);
  // The test's own keys last: those may open another table ([log]). Two threads unless the
  // test names its own number.
  const bool own_threads = gateway_extra.find("threads =") != std::string::npos;
  // A test's own supplier_listen (the network-fault tests' suppliers dial from a namespace).
  const bool own_listen = gateway_extra.find("supplier_listen =") != std::string::npos;
  config = std::string("[gateway]\n") + (own_listen ? "" : "supplier_listen = \"127.0.0.1:0\"\n") +
           (own_threads ? "" : "threads = 2\n") + "routes_file = \"routes.toml\"\n" +
           gateway_extra +
           (tables.find("[metrics]") != std::string::npos
                ? std::string("\n")
                : std::string("\n[metrics]\nlisten = \"127.0.0.1:0\"\n") +
                      (metrics ? "" : "enabled = false\n")) +
           tables;
  dir.write("gatewayd.toml", config);
  start("gatewayd.log", env);
}

void gateway_fixture::keep_ports() {
  replace_all(config, "supplier_listen = \"127.0.0.1:0\"",
              "supplier_listen = \"127.0.0.1:" + std::to_string(supplier_port) + "\"");
  replace_all(config, "listen = \"127.0.0.1:0\"",
              "listen = \"127.0.0.1:" + std::to_string(metrics_port) + "\"");
  dir.write("gatewayd.toml", config);
}

gateway_fixture::~gateway_fixture() = default;

void gateway_fixture::restart(const std::string& log_name, const std::vector<std::string>& env) {
  start(log_name, env);
}

void gateway_fixture::start(const std::string& log_name, const std::vector<std::string>& env) {
  daemon = std::make_unique<daemon_process>(
      gatewayd_binary(),
      std::vector<std::string>{"--config", config_path(), "--ports-file", ports_path()},
      dir.path() / log_name, env);
  const auto json = read_ports_file(ports_path(), *daemon, std::chrono::seconds(20));
  if (!json) throw std::runtime_error("gatewayd did not start:\n" + daemon->log());
  supplier_port = port_of(*json, "supplier");
  metrics_port = port_of(*json, "metrics");
}

bool gateway_fixture::consumers_connected(const std::vector<std::string>& names,
                                          std::chrono::milliseconds timeout) const {
  return eventually(
      [&] {
        for (const auto& n : names)
          if (scrape_metric(metrics_port, "gatewayd_consumer_connected{consumer=\"" + n + "\"}") !=
              1)
            return false;
        return true;
      },
      timeout);
}

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
long gateway_fixture::vm_size_kib() const {
  return status_field(daemon->pid(), "VmSize");
}

std::string consumer_toml(const std::string& name, const std::string& endpoint,
                          const std::string& extra) {
  return "[consumers." + name + "]\nendpoint = \"" + endpoint + "\"\n" + extra + "\n";
}

bool gateway_fixture::reload_with(const std::string& key, const std::string& value) {
  std::ifstream in(config_path());
  std::stringstream text;
  text << in.rdbuf();
  const std::regex line("(^|\n)" + key + " = [^\n]*");
  const std::string edited = std::regex_replace(text.str(), line, "$1" + key + " = " + value,
                                                std::regex_constants::format_first_only);
  if (edited == text.str()) throw std::runtime_error(key + " is not in gatewayd.toml");
  const std::string reloads = R"(gatewayd_config_reloads_total{result="success"})";
  const double before = std::max(0.0, scrape_metric(metrics_port, reloads));
  dir.write("gatewayd.toml.new", edited);
  std::filesystem::rename(dir.path() / "gatewayd.toml.new", config_path());
  daemon->signal(SIGHUP);
  return eventually([&] { return scrape_metric(metrics_port, reloads) > before; },
                    std::chrono::seconds(10));
}

std::string route_toml(const std::string& match, const std::vector<std::string>& to) {
  std::string s = "[[routes]]\nmatch = \"" + match + "\"\nto = [";
  for (std::size_t i = 0; i < to.size(); ++i)
    s += (i ? ", \"" : "\"") + to[i] + "\"";
  return s + "]\n";
}

}  // namespace gatewayd::test
