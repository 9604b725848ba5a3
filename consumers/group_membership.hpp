// A consumer's membership of its group as a part of its own: which group it hands over to, and
// the handover: what it holds goes to the other members when it fails, falls behind or leaves,
// and a member that comes up is handed what the members that are down hold.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "consumers/consumer_stats.hpp"
#include "consumers/frame_queue.hpp"
#include "runtime/executor.hpp"

namespace gatewayd::consumers {

class consumer;
class consumer_group;

// Why a member hands its frames over: its link went down (queued and unacknowledged frames go),
// it fell behind (queued ones), or a reload removed it (queued ones).
enum class handover_cause : std::uint8_t { failed, slow, removed };

// What the membership asks of the consumer that owns it.
class membership_owner {
 public:
  // Kept alive by a handover posted to its strand.
  virtual std::shared_ptr<void> keep_alive() = 0;
  // The consumer the group knows it as.
  virtual const consumer& as_member() const noexcept = 0;
  // Strand: the frames `cause` hands over, oldest first, with the reference each owns, appended
  // to `out` and no longer its own (nothing, when the cause does not apply to it now).
  virtual void take_held(handover_cause cause, std::vector<frame_slice>& out) = 0;

 protected:
  ~membership_owner() = default;
};

class group_membership {
 public:
  group_membership(const runtime::strand& strand, membership_owner& owner, consumer_stats& stats)
      : strand_(strand), owner_(owner), stats_(stats) {}

  // Any thread: from now on, what it holds when it fails goes to `group`'s other live members
  // (an empty `group`: to nobody, it keeps what it holds, as a consumer that is not a member).
  void join(std::weak_ptr<consumer_group> group);
  // Any thread: whether it ever joined a group (read on every put: no lock).
  bool grouped() const noexcept { return grouped_.load(std::memory_order_relaxed); }
  // The group it is a member of now (null: none, or gone).
  std::shared_ptr<consumer_group> group() const;

  // Strand: gives what `cause` hands over to the group's other members, if one is up.
  void hand_over_held(handover_cause cause);
  // Any thread: if it is down (or behind) while another member is up, it hands over (on the
  // strand).
  void hand_over_if_down();
  // Any thread, after it was given frames while down: hands them over if another member is up.
  void hand_over_if_other_up();
  // Strand: it is up again; the group's members that are down hand it what they hold.
  void came_up();
  // Frames handed to it after it closed go on to a member that is up; false when none is.
  bool pass_on(std::span<const frame_slice> frames);

 private:
  const runtime::strand& strand_;
  membership_owner& owner_;
  consumer_stats& stats_;
  mutable std::mutex mutex_;             // group_: join() runs on the reload's thread
  std::weak_ptr<consumer_group> group_;  // under mutex_
  std::atomic<bool> grouped_{false};
};

}  // namespace gatewayd::consumers
