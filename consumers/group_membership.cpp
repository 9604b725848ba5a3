// A member's side of its group: handing over what it holds, and being handed what others held.
#include "consumers/group_membership.hpp"

#include "consumers/consumer_group.hpp"

namespace gatewayd::consumers {

void group_membership::join(std::weak_ptr<consumer_group> group) {
  std::lock_guard lock(mutex_);
  group_ = std::move(group);
  grouped_.store(true, std::memory_order_relaxed);
}

std::shared_ptr<consumer_group> group_membership::group() const {
  std::lock_guard lock(mutex_);
  return group_.lock();
}

void group_membership::hand_over_held(handover_cause cause) {
  if (!grouped()) return;
  const std::shared_ptr<consumer_group> g = group();
  const consumer* self = &owner_.as_member();
  if (!g || !g->other_up(self, cause == handover_cause::slow)) return;
  // Rare (a member's failure): allocating here is fine.
  std::vector<frame_slice> frames;
  owner_.take_held(cause, frames);
  if (frames.empty()) return;
  // Owed by the members that take them from here on (take_over), not by this one.
  stats_.confirms_settled.fetch_add(confirms_in(frames), std::memory_order_relaxed);
  stats_.handovers.fetch_add(1, std::memory_order_relaxed);
  stats_.handed_over_frames.fetch_add(frames.size(), std::memory_order_relaxed);
  g->hand_over(self, frames);
}

void group_membership::hand_over_if_down() {
  asio::post(strand_, [self = owner_.keep_alive(), this] {
    hand_over_held(handover_cause::failed);
    hand_over_held(handover_cause::slow);
  });
}

void group_membership::hand_over_if_other_up() {
  const std::shared_ptr<consumer_group> g = group();
  if (g && g->other_up(&owner_.as_member(), false)) hand_over_if_down();
}

void group_membership::came_up() {
  if (!grouped()) return;
  if (const std::shared_ptr<consumer_group> g = group()) g->member_up(&owner_.as_member());
}

bool group_membership::pass_on(std::span<const frame_slice> frames) {
  const std::shared_ptr<consumer_group> g = group();
  const consumer* self = &owner_.as_member();
  if (!g || !g->other_up(self, false)) return false;
  g->hand_over(self, frames);
  return true;
}

}  // namespace gatewayd::consumers
