// Capped exponential backoff with equal jitter: how long a consumer waits before redialing.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

namespace gatewayd::consumers {

// Attempt k (from 0) waits a uniformly random time in [c/2, c], where c = min(initial * 2^k,
// max): "equal jitter". Half of every delay is guaranteed, so a dead endpoint is never
// hammered, and the other half spreads the redials of many consumers that lost the same peer
// at the same moment. reset() after a successful connection starts over from `initial`.
class backoff {
 public:
  // Uniform in [0, 1). Tests pass a fixed sequence; by default a seeded PRNG.
  using random_source = std::function<double()>;

  backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max,
          random_source random = {});

  // The delay before the next attempt; doubles the ceiling for the one after.
  std::chrono::milliseconds next();
  void reset() noexcept {
    ceiling_ = initial_;
    attempts_ = 0;
  }

  // The upper bound of the next delay.
  std::chrono::milliseconds ceiling() const noexcept { return ceiling_; }
  // Delays handed out since the last reset().
  std::uint32_t attempts() const noexcept { return attempts_; }

 private:
  std::chrono::milliseconds initial_;
  std::chrono::milliseconds max_;
  std::chrono::milliseconds ceiling_;
  std::uint32_t attempts_ = 0;
  random_source random_;
};

}  // namespace gatewayd::consumers
