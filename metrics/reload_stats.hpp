// Outcome counters of routing-table reloads, written by the gateway's control strand.
#pragma once

#include <atomic>
#include <cstdint>

namespace gatewayd::metrics {

struct reload_stats {
  std::atomic<std::uint64_t> succeeded{0};
  std::atomic<std::uint64_t> failed{0};
  std::atomic<bool> last_successful{true};
  std::atomic<double> last_success_unix_seconds{0};  // the initial load counts as a success
};

}  // namespace gatewayd::metrics
