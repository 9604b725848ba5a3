// Bytes held against a limit by any thread, lock-free: the one shape of the gateway's byte caps.
#pragma once

#include <atomic>
#include <cstdint>

namespace gatewayd::runtime {

// The caps on what peers can make the gateway hold: queued frames (max_queued_bytes), frames
// still arriving (max_partial_frame_bytes), the confirm ledgers (max_confirm_ledger_bytes).
// A holder takes bytes when it starts holding them and gives back exactly as many when it lets
// them go, from whatever thread. Every operation is relaxed: the count bounds memory and orders
// nothing else (the bytes themselves are handed over by the queues and locks that carry them).
class byte_budget {
 public:
  // 0 = no limit.
  explicit byte_budget(std::uint64_t limit = 0) noexcept : limit_(limit) {}
  byte_budget(const byte_budget&) = delete;
  byte_budget& operator=(const byte_budget&) = delete;

  // For a budget made before its setting is read (the confirm ledgers', in supplier_stats):
  // once, at start-up, before the first take.
  void set_limit(std::uint64_t bytes) noexcept { limit_.store(bytes, std::memory_order_relaxed); }

  // Takes `bytes` if they fit, else nothing. Never past the limit, not even for a moment, and
  // refused only when they do not fit: a compare-and-swap loop. For a holder whose refusal is
  // costly (a frame that cannot grow costs its connection) and that takes rarely. (A take()
  // may have passed the limit already: then nothing fits.)
  bool try_take(std::uint64_t bytes) noexcept {
    const std::uint64_t limit = limit_.load(std::memory_order_relaxed);
    std::uint64_t used = used_.load(std::memory_order_relaxed);
    do {
      if (limit != 0 && (used > limit || bytes > limit - used)) return false;
    } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
    return true;
  }
  // Takes `bytes` if they fit, else nothing, with one atomic add, taken back when they did not
  // fit: for the put path, which takes once per batch. What is taken never passes the limit, but
  // near it used() may for a moment, and a refused take's add may get a concurrent take refused
  // too: an occasional early refusal right at the limit.
  bool try_take_optimistic(std::uint64_t bytes) noexcept {
    const std::uint64_t before = used_.fetch_add(bytes, std::memory_order_relaxed);
    const std::uint64_t limit = limit_.load(std::memory_order_relaxed);
    if (limit == 0 || before + bytes <= limit) return true;
    used_.fetch_sub(bytes, std::memory_order_relaxed);
    return false;
  }
  // Takes `bytes` whether they fit or not, for a holder that does not drop: a backpressure
  // consumer queues anyway and pauses its suppliers (the overshoot is bounded by what they had
  // read); a confirm ledger counts what it holds, and the consumers share the limit out.
  void take(std::uint64_t bytes) noexcept { used_.fetch_add(bytes, std::memory_order_relaxed); }
  void give_back(std::uint64_t bytes) noexcept {
    if (bytes) used_.fetch_sub(bytes, std::memory_order_relaxed);
  }

  std::uint64_t used() const noexcept { return used_.load(std::memory_order_relaxed); }
  std::uint64_t limit() const noexcept { return limit_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> limit_;
  std::atomic<std::uint64_t> used_{0};
};

}  // namespace gatewayd::runtime
