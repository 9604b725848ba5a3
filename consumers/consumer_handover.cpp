// The consumer's side of its group membership (group_membership.hpp): what it gives up when it
// hands over, and what it takes over, in front of its queue.
#include <limits>

#include "consumers/consumer.hpp"
#include "consumers/consumer_group.hpp"

namespace gatewayd::consumers {

void consumer::join(std::weak_ptr<consumer_group> group) {
  membership_.join(std::move(group));
  std::lock_guard lock(mutex_);
  publish_pause_mark_locked();
}

void consumer::leave_group(std::weak_ptr<consumer_group> group) {
  join(std::move(group));
  asio::post(strand_, [self = shared_from_this()] {
    self->membership_.hand_over_held(handover_cause::removed);
  });
}

void consumer::take_over(std::span<const frame_slice> frames) {
  if (frames.empty()) return;
  bool start = false;
  bool down = false;
  bool closed = false;
  {
    std::lock_guard lock(mutex_);
    closed = closing_.now() >= life::closed;
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
    if (!membership_.pass_on(frames)) put(frames, nullptr, false);
    return;
  }
  stats_.taken_over_frames.fetch_add(frames.size(), std::memory_order_relaxed);
  if (start) drain_.start(false);
  // It went down meanwhile (its own handover already ran): they go on to a member that is up.
  if (down) membership_.hand_over_if_other_up();
}

void consumer::take_held(handover_cause cause, std::vector<frame_slice>& out) {
  {
    std::lock_guard lock(mutex_);
    if (closing_.now() >= life::closed) return;
    const bool applies = cause == handover_cause::failed ? !writable(flow_)
                         : cause == handover_cause::slow ? flow_ == flow::congested
                                                         : true;
    if (!applies) return;
    // Written but not acknowledged on the connection that went down: older than the queue.
    if (cause == handover_cause::failed) acks_.hand_over(out);
    const frame_counts queued = queue_.take(std::numeric_limits<std::size_t>::max(),
                                            std::numeric_limits<std::uint64_t>::max(), out);
    if (opts_.budget) opts_.budget->give_back(queued.bytes);
    publish_depth_locked();
    if (below_low_water_locked()) paused_.release_locked();
  }
  paused_.resume_released();
}

}  // namespace gatewayd::consumers
