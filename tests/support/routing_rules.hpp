// Routing rules for the routing tests, written the short way: consumer names, routes, dead letter.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "routing/routing_table.hpp"

namespace gatewayd::test {

using indices = std::vector<routing::consumer_index>;

struct route_def {
  std::string match;
  std::vector<std::string> to;
};

inline routing::routing_rules make_config(const std::vector<std::string>& consumers,
                                          const std::vector<route_def>& routes,
                                          std::optional<std::string> dead_letter = std::nullopt) {
  routing::routing_rules rules;
  rules.consumers = consumers;
  for (const auto& r : routes)
    rules.routes.push_back(routing::route_spec{r.match, r.to});
  rules.dead_letter = std::move(dead_letter);
  return rules;
}

// "c7": built by appending, since `"c" + std::to_string(i)` trips GCC 12's -Wrestrict
// false positive at -O3.
inline std::string numbered(const char* prefix, std::size_t i) {
  std::string s{prefix};
  s += std::to_string(i);
  return s;
}

inline indices to_vector(const routing::lookup_result& r) {
  return {r.consumers.begin(), r.consumers.end()};
}

}  // namespace gatewayd::test
