// Live counters of one consumer, written on its own path and read by the metrics scrape.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string_view>

#include "consumers/last_error.hpp"
#include "runtime/enum_names.hpp"

namespace gatewayd::consumers {

// Why a frame queued for a consumer was never sent. The names are the metric's `reason` label.
enum class drop_reason : std::uint8_t {
  queue_full,     // drop-oldest evicted it, or drop-newest refused it
  queue_bytes,    // the consumer's byte cap (queue_bytes) was reached
  global_bytes,   // the gateway-wide max_queued_bytes cap was reached
  slow_consumer,  // the disconnect policy discarded the queue
  removed,        // the consumer was removed by a reload and its drain time ran out
  shutdown,       // still queued when the gateway's drain time ran out
};
inline constexpr runtime::enum_names<drop_reason, 6> drop_reason_names{
    {"queue_full", "queue_bytes", "global_bytes", "slow_consumer", "removed", "shutdown"}};
inline constexpr std::size_t drop_reason_count = drop_reason_names.count;
inline std::string_view to_string(drop_reason r) noexcept {
  return drop_reason_names(r);
}

// Single-writer counters use relaxed atomics: a scrape may see a slightly old value, never a
// torn one, and the hot path pays no lock and no contended cache line for them.
struct consumer_stats {
  std::atomic<std::uint64_t> queued_frames{0};
  std::atomic<std::uint64_t> queued_bytes{0};
  std::atomic<std::uint64_t> sent_frames{0};
  std::atomic<std::uint64_t> sent_bytes{0};
  std::atomic<std::uint64_t> reconnects{0};
  std::atomic<bool> connected{false};
  // Not connected, or behind for longer than slow_consumer_ms: its overflow policy applies.
  std::atomic<bool> congested{true};
  std::array<std::atomic<std::uint64_t>, drop_reason_count> dropped{};
  // Thread time lost to this consumer, in ns (gatewayd_consumer_blocked_seconds_total):
  // waiting for its locks (the queue lock in put(); the writer mutex of the "mutex" drain
  // model), and inside the blocking writes of that model.
  std::atomic<std::uint64_t> blocked_lock_ns{0};
  std::atomic<std::uint64_t> blocked_write_ns{0};
  // Set by the link, not on the data path.
  consumers::last_error last_error;

  std::uint64_t dropped_total() const noexcept {
    std::uint64_t sum = 0;
    for (const auto& d : dropped)
      sum += d.load(std::memory_order_relaxed);
    return sum;
  }
};

}  // namespace gatewayd::consumers
