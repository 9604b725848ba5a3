// The gateway's confirm bound (max_confirm_ledger_bytes) shared out among its consumers: how many
// CONFIRM frames each may owe before it is full and its overflow policy applies to them.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace gatewayd::consumers {

// What a consumer owes is its own (../shared/wire-protocol.md): a consumer that is down, or does
// not acknowledge, fills its share and no more, so the frames that go to the others never wait
// for it. Each consumer (each member of a group) has an equal share; a reload that adds or
// removes consumers shares the bound out again. Lock-free: put() reads it once per batch.
class confirm_share {
 public:
  // What an owed frame is counted at: the most a closed connection keeps for one
  // (protocol/confirm_ledger.hpp), above what an open one's entry costs.
  static constexpr std::uint64_t owed_frame_bytes = 64;

  confirm_share() = default;
  confirm_share(const confirm_share&) = delete;
  confirm_share& operator=(const confirm_share&) = delete;

  // `bound_bytes` 0: no bound. Any thread (the control strand, on load and reload).
  void share_out(std::uint64_t bound_bytes, std::size_t consumers) noexcept {
    const std::uint64_t n = consumers ? consumers : 1;
    const std::uint64_t frames =
        bound_bytes ? std::max<std::uint64_t>(1, bound_bytes / owed_frame_bytes / n) : 0;
    frames_.store(frames, std::memory_order_relaxed);
  }
  // CONFIRM frames one consumer may owe (0: no bound).
  std::uint64_t frames() const noexcept { return frames_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> frames_{0};
};

}  // namespace gatewayd::consumers
