// What the routing table is built from: consumer names by index, routes, the dead letter.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gatewayd::routing {

struct route_spec {
  std::string match;            // a valid pattern (routing/pattern.hpp)
  std::vector<std::string> to;  // consumer names, at least one

  friend bool operator==(const route_spec&, const route_spec&) = default;
};

struct routing_rules {
  std::vector<std::string> consumers;      // a consumer's index is its position here
  std::vector<route_spec> routes;          // in file order
  std::optional<std::string> dead_letter;  // consumer that receives unroutable frames

  friend bool operator==(const routing_rules&, const routing_rules&) = default;
};

}  // namespace gatewayd::routing
