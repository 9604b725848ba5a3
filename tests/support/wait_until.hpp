// The tests' one bounded wait on a condition: polls `pred` until it holds or `timeout` passes.
// Tests wait on what they need (a count, a metric, a state), never on a fixed time.
#pragma once

#include <chrono>
#include <thread>

namespace gatewayd::test {

// True once `pred()` is; false when `timeout` passed first. `every`: how often it asks.
template <class Pred>
bool wait_until(Pred&& pred, std::chrono::milliseconds timeout,
                std::chrono::microseconds every = std::chrono::milliseconds(1)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(every);
  }
  return true;
}

}  // namespace gatewayd::test
