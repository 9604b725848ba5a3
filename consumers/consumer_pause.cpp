// When the suppliers feeding a consumer pause (its pause mark), and when they go on (its
// low-water mark): the backpressure rule, under the consumer's lock; resumed outside it.
#include "consumers/consumer.hpp"

#include <algorithm>

namespace gatewayd::consumers {

// Only a group's choice reads it: a consumer of its own pays nothing for it.
void consumer::publish_pause_mark_locked() noexcept {
  if (!membership_.grouped()) return;
  stats_.at_pause_mark.store(pause_mark_locked(false) != pause_mark::none,
                             std::memory_order_relaxed);
}

// Backpressure pauses at the queue's limits; any consumer that keeps up pauses at the gateway's
// own high-water mark, where the gateway, not the consumer, is behind. One whose socket refuses
// bytes is in its grace (slow_after): its queue may fill to its own limits first, so that a
// consumer that stalls does not stall the others fed by the same suppliers (they would wait out
// its grace); only a full queue (or the gateway-wide budget) pauses them, as nothing may be
// dropped before the grace is over. A draining consumer takes what was routed to it but pauses
// nobody: new frames go by a table that no longer names it.
consumer::pause_mark consumer::pause_mark_locked(bool over_budget) const noexcept {
  if (closing_.now() != life::open) return pause_mark::none;
  // Owing its share of the confirm bound it is full too; only its own suppliers pause for it.
  const bool full = at_limit(queue_, limits_) || over_budget ||
                    (limits_.policy == overflow_policy::backpressure && owes_share());
  // A spooled consumer's queue pauses nobody, full or past the high-water mark: it is bounded by
  // its limits, and the next frames go to the disk.
  if (spool_.on()) return spool_pause_mark_locked();
  if (limits_.policy == overflow_policy::backpressure && full) return pause_mark::consumer_full;
  if (policy_applies(flow_)) return pause_mark::none;
  const bool behind = flow_ == flow::refusing ? full : above_high_water(queue_, limits_);
  return behind ? pause_mark::gateway_behind : pause_mark::none;
}

bool consumer::below_low_water_locked() const noexcept {
  // Suppliers paused on this consumer are released when it stops taking frames (closing);
  // when the gateway had caught up with it, or it stopped keeping up (then its policy
  // applies); and, under backpressure, once the queue is down to half its limits.
  if (closing_.now() != life::open) return true;
  // With a spool nobody waits for the consumer: only for the disk. The same rule as the pause's:
  // a supplier paused for a disk that was behind goes on though the disk filled meanwhile, unless
  // backpressure holds it for that too (CI, 2026-12-03: one paused for good beside a full disk).
  if (spool_.on()) return spool_pause_mark_locked() == pause_mark::none;
  // A consumer whose socket refuses bytes holds its suppliers only while its queue is full
  // (put()); they go on once it is down to half its limits.
  const bool caught_up =
      policy_applies(flow_) || (flow_ == flow::refusing ? below_half_limits(queue_, limits_)
                                                        : below_low_water(queue_, limits_));
  if (limits_.policy != overflow_policy::backpressure) return caught_up;
  return caught_up && below_half_limits(queue_, limits_) && owes_under_half_share();
}

// Only the disk pauses a spooled consumer's suppliers: while it is behind, and when it is full
// under backpressure (under any other policy a full spool refuses frames, counted, and pauses
// nobody). Each pause ends by an event of its spool (spool_events::spool_may_resume).
consumer::pause_mark consumer::spool_pause_mark_locked() const noexcept {
  if (spool_behind()) return pause_mark::gateway_behind;
  if (limits_.policy == overflow_policy::backpressure && spool_.full())
    return pause_mark::consumer_full;
  return pause_mark::none;
}

bool consumer::owes_share() const noexcept {
  const std::uint64_t share = confirm_share();
  return share && stats_.confirms_owed() >= share;
}

std::uint64_t consumer::confirm_room_locked() const noexcept {
  const std::uint64_t share = confirm_share();
  if (!share || limits_.policy == overflow_policy::backpressure) return UINT64_MAX;
  const std::uint64_t owed = stats_.confirms_owed();
  return owed >= share ? 0 : share - owed;
}

bool consumer::owes_under_half_share() const noexcept {
  const std::uint64_t share = confirm_share();
  return !share || stats_.confirms_owed() < std::max<std::uint64_t>(share / 2, 1);
}

void consumer::tell_stalled(const std::vector<std::weak_ptr<flow_control_listener>>& paused) {
  for (const auto& w : paused) {
    if (auto l = w.lock()) l->paused_by_stalled_consumer();
  }
}

void consumer::resume_if_below_low_water() {
  {
    std::lock_guard lock(mutex_);
    if (below_low_water_locked()) paused_.release_locked();
  }
  paused_.resume_released();
}

}  // namespace gatewayd::consumers
