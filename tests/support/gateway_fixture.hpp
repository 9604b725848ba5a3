// Starts the real gatewayd on generated configs (ports chosen by the kernel) and tells the
// test where it listens.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/daemon_process.hpp"

namespace gatewayd::test {

struct gateway_fixture {
  temp_dir dir;
  std::unique_ptr<daemon_process> daemon;
  unsigned short supplier_port = 0;
  unsigned short metrics_port = 0;

  // `gateway_extra` goes into [gateway]; `routes` is the whole routes.toml.
  // Waits until the daemon logs that it listens; fails the test otherwise.
  gateway_fixture(const std::string& routes, const std::string& gateway_extra = "",
                  const std::vector<std::string>& env = {}, bool metrics = true);
  ~gateway_fixture();

  std::string config_path() const { return (dir.path() / "gatewayd.toml").string(); }
  std::string routes_path() const { return (dir.path() / "routes.toml").string(); }
  // Peak and current resident memory of the daemon, in KiB (from /proc/PID/status).
  long rss_kib() const;
  long peak_rss_kib() const;
};

// [consumers.NAME] with the endpoint and optional extra lines.
std::string consumer_toml(const std::string& name, const std::string& endpoint,
                          const std::string& extra = "");
std::string route_toml(const std::string& match, const std::vector<std::string>& to);

}  // namespace gatewayd::test
