// A group member's side of the group: what it holds goes to the other members when it fails,
// falls behind or leaves, and what they hand over goes in front of its queue.
#include <limits>

#include "consumers/consumer.hpp"
#include "consumers/consumer_group.hpp"

namespace gatewayd::consumers {

void consumer::join(std::weak_ptr<consumer_group> group) {
  std::lock_guard lock(mutex_);
  group_ = std::move(group);
  grouped_ = true;
  publish_pause_mark_locked();
}

void consumer::leave_group(std::weak_ptr<consumer_group> group) {
  join(std::move(group));
  asio::post(strand_,
             [self = shared_from_this()] { self->hand_over_held(handover_cause::removed); });
}

void consumer::take_over(std::span<const frame_slice> frames) {
  if (frames.empty()) return;
  bool start = false;
  bool down = false;
  bool closed = false;
  {
    std::lock_guard lock(mutex_);
    closed = life_ >= life::closed;
    if (!closed) {
      // In front, in their order: they were routed before anything this member holds of their
      // addresses. A handover never drops: the queue may pass its limits by what it took until
      // it writes them (a congested member's policy trims it then).
      queue_.push_front_batch(frames);
      if (opts_.budget) opts_.budget->take(count(frames).bytes);
      // Their debts move with them: owed by this member from now on.
      take_confirms_locked(confirms_in(frames));
      publish_depth_locked();
      if (writable(flow_) && writer_ == writer::idle) {
        enter_writer_locked(writer::writing);
        start = true;
      }
      down = !writable(flow_);
    }
  }
  if (closed) {
    // Chosen while it was up, closed since (a reload removed it, the gateway stops): nothing
    // would ever write them here. They go on to a member that is up, or, with none, are refused
    // as put() refuses what reaches a closed consumer (counted as its end says).
    const std::shared_ptr<consumer_group> group = group_of();
    if (group && group->other_up(this, false)) {
      group->hand_over(this, frames);
    } else {
      put(frames, nullptr, false);
    }
    return;
  }
  stats_.taken_over_frames.fetch_add(frames.size(), std::memory_order_relaxed);
  if (start) drain_.start(false);
  // It went down meanwhile (its own handover already ran): they go on to a member that is up.
  if (down) hand_over_if_other_up();
}

void consumer::hand_over_if_down() {
  asio::post(strand_, [self = shared_from_this()] {
    self->hand_over_held(handover_cause::failed);
    self->hand_over_held(handover_cause::slow);
  });
}

void consumer::hand_over_if_other_up() {
  const std::shared_ptr<consumer_group> group = group_of();
  if (group && group->other_up(this, false)) hand_over_if_down();
}

std::shared_ptr<consumer_group> consumer::group_of() const {
  std::lock_guard lock(mutex_);
  return group_.lock();
}

void consumer::hand_over_held(handover_cause cause) {
  std::shared_ptr<consumer_group> group;
  {
    std::lock_guard lock(mutex_);
    if (!grouped_) return;
    group = group_.lock();
  }
  if (!group || !group->other_up(this, cause == handover_cause::slow)) return;
  // Rare (a member's failure): allocating here is fine.
  std::vector<frame_slice> frames;
  {
    std::lock_guard lock(mutex_);
    if (life_ >= life::closed) return;
    const bool applies = cause == handover_cause::failed ? !writable(flow_)
                         : cause == handover_cause::slow ? flow_ == flow::congested
                                                         : true;
    if (!applies) return;
    // Written but not acknowledged on the connection that went down: older than the queue.
    if (cause == handover_cause::failed && !unacked_.empty()) {
      const auto held = unacked_.all();
      frames.assign(held.begin(), held.end());
      unacked_.pop_front(held.size());  // the references move with the frames
    }
    const frame_counts queued = queue_.take(std::numeric_limits<std::size_t>::max(),
                                            std::numeric_limits<std::uint64_t>::max(), frames);
    if (opts_.budget) opts_.budget->give_back(queued.bytes);
    publish_depth_locked();
    if (below_low_water_locked()) paused_.release_locked();
  }
  paused_.resume_released();
  publish_unacked();
  if (frames.empty()) return;
  // Owed by the members that take them from here on (take_over), not by this one.
  stats_.confirms_settled.fetch_add(confirms_in(frames), std::memory_order_relaxed);
  stats_.handovers.fetch_add(1, std::memory_order_relaxed);
  stats_.handed_over_frames.fetch_add(frames.size(), std::memory_order_relaxed);
  group->hand_over(this, frames);
}

void consumer::member_came_up() {
  std::shared_ptr<consumer_group> group;
  {
    std::lock_guard lock(mutex_);
    if (!grouped_) return;
    group = group_.lock();
  }
  if (group) group->member_up(this);
}

}  // namespace gatewayd::consumers
