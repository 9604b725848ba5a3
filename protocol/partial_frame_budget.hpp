// The gateway-wide cap on read memory held for frames still arriving (max_partial_frame_bytes).
#pragma once

#include <atomic>
#include <cstdint>

namespace gatewayd::protocol {

// Every supplier connection may hold one standard 64 KiB chunk (bounded by the connection
// cap); what a frame larger than that needs on top, while its bytes arrive, is taken from this
// budget, shared by all connections. A refusal costs the connection (the session closes it),
// so the cap is never exceeded, not even for a moment: a compare-and-swap loop rather than an
// add rolled back. Touched once per growth step of a large frame, never on the small-frame path.
class partial_frame_budget {
 public:
  explicit partial_frame_budget(std::uint64_t max_bytes /* 0 = unlimited */) noexcept
      : max_(max_bytes) {}
  partial_frame_budget(const partial_frame_budget&) = delete;
  partial_frame_budget& operator=(const partial_frame_budget&) = delete;

  bool try_take(std::uint64_t bytes) noexcept {
    std::uint64_t used = used_.load(std::memory_order_relaxed);
    do {
      if (max_ != 0 && bytes > max_ - used) return false;
    } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
    return true;
  }
  void give_back(std::uint64_t bytes) noexcept {
    if (bytes) used_.fetch_sub(bytes, std::memory_order_relaxed);
  }

  std::uint64_t used() const noexcept { return used_.load(std::memory_order_relaxed); }
  std::uint64_t max_bytes() const noexcept { return max_; }

 private:
  const std::uint64_t max_;
  std::atomic<std::uint64_t> used_{0};
};

}  // namespace gatewayd::protocol
