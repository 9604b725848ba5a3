#include "config/routes_config.hpp"

namespace gatewayd::config {

routing::routing_rules routes_config::rules() const {
  routing::routing_rules r;
  r.consumers.reserve(consumers.size());
  for (const auto& c : consumers)
    r.consumers.push_back(c.name);
  r.routes = routes;
  r.dead_letter = dead_letter;
  return r;
}

}  // namespace gatewayd::config
