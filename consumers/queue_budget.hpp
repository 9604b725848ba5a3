// The gateway-wide cap on bytes queued across all consumers (max_queued_bytes).
#pragma once

#include <atomic>
#include <cstdint>

namespace gatewayd::consumers {

// Shared by every consumer; lock-free. A consumer reserves a whole put batch with one
// fetch_add and gives bytes back when frames are sent or dropped, so the shared cache line is
// touched once per batch, not once per frame. Near the cap a refused reservation is rolled
// back, which may make a concurrent reservation fail too: the cap is never exceeded by
// try_reserve(), at the price of an occasional early refusal right at the limit.
class queue_budget {
 public:
  explicit queue_budget(std::uint64_t max_bytes /* 0 = unlimited */) noexcept : max_(max_bytes) {}
  queue_budget(const queue_budget&) = delete;
  queue_budget& operator=(const queue_budget&) = delete;

  bool try_reserve(std::uint64_t bytes) noexcept {
    const std::uint64_t before = used_.fetch_add(bytes, std::memory_order_relaxed);
    if (max_ == 0 || before + bytes <= max_) return true;
    used_.fetch_sub(bytes, std::memory_order_relaxed);
    return false;
  }
  // Reserves past the cap: the backpressure policy never drops, so it queues anyway and
  // pauses its suppliers instead; the overshoot is bounded by what they had already read.
  void force_reserve(std::uint64_t bytes) noexcept {
    used_.fetch_add(bytes, std::memory_order_relaxed);
  }
  void release(std::uint64_t bytes) noexcept {
    if (bytes) used_.fetch_sub(bytes, std::memory_order_relaxed);
  }

  std::uint64_t used() const noexcept { return used_.load(std::memory_order_relaxed); }
  std::uint64_t max_bytes() const noexcept { return max_; }

 private:
  const std::uint64_t max_;
  std::atomic<std::uint64_t> used_{0};
};

}  // namespace gatewayd::consumers
