// A consumer group's TOML and its per-member series on /metrics, for the suites that run one.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "tests/support/gateway_fixture.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"

namespace gatewayd::test {

inline std::string quoted_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i)
    out += (i ? ", \"" : "\"") + items[i] + "\"";
  return out + "]";
}

// The [consumers.NAME] table of a group over `endpoints`, with `extra` lines.
inline std::string group_toml(const std::string& name, const std::vector<std::string>& endpoints,
                              const std::string& extra = "") {
  return "[consumers." + name + "]\nendpoints = " + quoted_list(endpoints) + "\n" + extra + "\n";
}

inline std::string member_series(const std::string& metric, const std::string& group,
                                 const std::string& member) {
  return metric + "{consumer=\"" + group + "\",member=\"" + member + "\"}";
}

// Every one of `members` shows gatewayd_consumer_connected == want within `timeout`.
inline bool members_connected(const gateway_fixture& gw, const std::string& group,
                              const std::vector<std::string>& members, double want = 1,
                              std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  return eventually(
      [&] {
        for (const auto& m : members)
          if (scrape_metric(gw.metrics_port,
                            member_series("gatewayd_consumer_connected", group, m)) != want)
            return false;
        return true;
      },
      timeout);
}

}  // namespace gatewayd::test
