// The four overflow policies as a pure function of the queue, its limits and a put() batch:
// which frames join the queue and which are dropped, and why. No sockets and no locks (the
// consumer calls it under its own mutex), so every policy is tested without a network.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "consumers/consumer_stats.hpp"
#include "consumers/frame_queue.hpp"
#include "consumers/overflow_policy.hpp"
#include "consumers/queue_budget.hpp"
#include "protocol/frame_chunk.hpp"

namespace gatewayd::consumers {

struct queue_limits {
  std::uint32_t capacity = 10000;  // frames
  std::uint64_t byte_cap = 0;      // 0 = none
  overflow_policy policy = overflow_policy::drop_oldest;
};

// What admitting one batch came to.
struct admission {
  std::uint32_t queued = 0;                              // frames of the batch now in the queue
  std::array<std::uint64_t, drop_reason_count> drops{};  // by reason, evictions included
  std::uint64_t discarded = 0;  // the backlog the disconnect policy threw away
  bool slow = false;            // the disconnect policy fired: drop the link
  bool over_budget = false;     // backpressure queued past the global budget
};

// Admits `frames`, each owning one chunk reference, into `queue`: a queued frame keeps its
// reference, a refused or evicted one hands it to `refused`. Every queued frame holds its bytes
// in `budget` (the gateway-wide byte cap; may be null) until it is sent or dropped. The budget
// is reserved for the whole batch at once; only when that fails (the gateway is near its cap)
// does each frame reserve its own bytes, so the shared counter is touched once per batch.
admission admit(frame_queue& queue, std::span<const frame_slice> frames, const queue_limits& limits,
                queue_budget* budget, protocol::release_batch& refused);

// True when the queue is at its frame or byte limit (backpressure then pauses suppliers).
bool at_limit(const frame_queue& queue, const queue_limits& limits) noexcept;

}  // namespace gatewayd::consumers
