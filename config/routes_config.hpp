// The routing table file (routes.toml) as the operator wrote it: plain, validated data.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "consumers/consumer_spec.hpp"
#include "routing/publish_permissions.hpp"
#include "routing/routing_rules.hpp"

namespace gatewayd::config {

struct routes_config {
  std::vector<consumers::consumer_spec> consumers;  // in file order: index = position
  std::vector<routing::route_spec> routes;          // in file order
  std::optional<std::string> dead_letter;           // consumer that receives unroutable frames
  // Who may publish what: [suppliers.NAME] in file order, and [suppliers_default] (absent:
  // publish = [">"], everyone everything, as before permissions existed).
  std::vector<routing::publish_rule> suppliers;
  routing::publish_rule suppliers_default{"", "", {">"}, {}};
  // Whether the file has a [suppliers_default] table, or the rule above is the implicit one
  // (with TLS identities in use, --check warns that unlisted ones may then publish anywhere).
  bool suppliers_default_written = false;

  // What the routing table is built from (consumer names in the same order).
  routing::routing_rules rules() const;

  friend bool operator==(const routes_config&, const routes_config&) = default;
};

}  // namespace gatewayd::config
