#include "routing/routing_config.hpp"

namespace gatewayd::routing {

std::string_view to_string(overflow_policy p) noexcept {
  switch (p) {
    case overflow_policy::drop_oldest:
      return "drop-oldest";
    case overflow_policy::drop_newest:
      return "drop-newest";
    case overflow_policy::disconnect:
      return "disconnect";
    case overflow_policy::backpressure:
      return "backpressure";
  }
  return "unknown";
}

std::optional<overflow_policy> parse_overflow_policy(std::string_view text) noexcept {
  for (auto p : {overflow_policy::drop_oldest, overflow_policy::drop_newest,
                 overflow_policy::disconnect, overflow_policy::backpressure}) {
    if (text == to_string(p)) return p;
  }
  return std::nullopt;
}

}  // namespace gatewayd::routing
