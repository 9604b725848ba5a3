#include "consumers/consumer_stats.hpp"

namespace gatewayd::consumers {

std::string_view to_string(drop_reason r) noexcept {
  switch (r) {
    case drop_reason::queue_full:
      return "queue_full";
    case drop_reason::queue_bytes:
      return "queue_bytes";
    case drop_reason::global_bytes:
      return "global_bytes";
    case drop_reason::slow_consumer:
      return "slow_consumer";
    case drop_reason::removed:
      return "removed";
    case drop_reason::shutdown:
      return "shutdown";
  }
  return "unknown";
}

}  // namespace gatewayd::consumers
