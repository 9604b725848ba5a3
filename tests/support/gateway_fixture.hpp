// Starts the real gatewayd on generated configs (ports chosen by the kernel) and tells the
// test where it listens, from the daemon's --ports-file. GATEWAYD_TEST_DAEMON=PATH runs another
// build of the daemon instead of this one (to show a test failing on the build before a fix).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/daemon_process.hpp"

namespace gatewayd::test {

struct gateway_fixture {
  temp_dir dir;
  std::string config;  // gatewayd.toml as written
  std::unique_ptr<daemon_process> daemon;
  unsigned short supplier_port = 0;
  unsigned short metrics_port = 0;

  // `gateway_extra` goes into [gateway]; `routes` is the whole routes.toml; `tables` (whole
  // tables such as [tls]) goes at the end of gatewayd.toml.
  // Waits until the daemon has written its ports file; fails the test otherwise.
  gateway_fixture(const std::string& routes, const std::string& gateway_extra = "",
                  const std::vector<std::string>& env = {}, bool metrics = true,
                  const std::string& tables = "");
  ~gateway_fixture();

  std::string config_path() const { return (dir.path() / "gatewayd.toml").string(); }
  std::string routes_path() const { return (dir.path() / "routes.toml").string(); }
  std::string ports_path() const { return (dir.path() / "ports.json").string(); }
  // Starts the daemon again on config_path() (after the test ended the last one), logging to
  // `log_name` in dir, and waits for its ports as the constructor does.
  void restart(const std::string& log_name, const std::vector<std::string>& env = {});
  // Writes the ports the daemon got into its gatewayd.toml, so a restart binds the same ones
  // (what a balancer in front of it expects).
  void keep_ports();
  // Rewrites the `key = ...` line of [gateway] in gatewayd.toml to `key = value` (atomically,
  // as an editor saving it would), sends SIGHUP and waits for the reload to succeed. Returns
  // false if no reload succeeded within 10 s.
  bool reload_with(const std::string& key, const std::string& value);
  // True once /metrics shows every named consumer connected (gatewayd_consumer_connected 1).
  bool consumers_connected(const std::vector<std::string>& names,
                           std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
  // Peak and current resident memory of the daemon, and its address space, in KiB (from
  // /proc/PID/status).
  // (Bounds on them are multiplied by memory_slack(), below.)
  long rss_kib() const;
  long peak_rss_kib() const;
  long vm_size_kib() const;

 private:
  void start(const std::string& log_name, const std::vector<std::string>& env);
};

// How much more memory an instrumented build may take than the bounds the memory tests assert:
// sanitizer shadow memory and quarantines (4 when instrumented(), support/binaries.hpp, else 1).
long memory_slack();

// How much longer an instrumented build's test peers may take to read what the gateway writes:
// for a grace period a test wants shorter than its load but longer than a healthy peer's pauses
// (10 when instrumented(), else 1).
int peer_slowdown();

// [consumers.NAME] with the endpoint and optional extra lines.
std::string consumer_toml(const std::string& name, const std::string& endpoint,
                          const std::string& extra = "");
std::string route_toml(const std::string& match, const std::vector<std::string>& to);

}  // namespace gatewayd::test
