// How many threads a configured `threads` value stands for: the one place 0 becomes a count.
#pragma once

#include <algorithm>
#include <thread>

namespace gatewayd::runtime {

// 0 = one per core (at least one).
inline unsigned thread_count(unsigned configured) noexcept {
  return configured ? configured : std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace gatewayd::runtime
