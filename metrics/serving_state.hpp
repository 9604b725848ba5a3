// Whether the gateway is serving, as /readyz tells a balancer: set by the gateway's control
// strand as it starts and stops, read by the HTTP threads.
#pragma once

#include <atomic>
#include <chrono>

namespace gatewayd::metrics {

struct serving_state {
  const std::chrono::system_clock::time_point started = std::chrono::system_clock::now();
  std::atomic<bool> listening{false};  // the supplier listener accepts connections
  std::atomic<bool> draining{false};   // SIGTERM came: lame duck, then the drain
};

}  // namespace gatewayd::metrics
