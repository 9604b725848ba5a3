// A consumer with several endpoints (a group): each frame routed to it goes to one live member,
// and a member that fails or leaves hands what it held to the others, first and in order.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "consumers/consumer.hpp"
#include "consumers/member_choice.hpp"

namespace gatewayd::consumers {

// What a group's put() splits a batch in: owned by the caller that routes (one per routing
// thread), reused for every group it puts to. It grows to the largest group and batch once,
// then allocates nothing.
struct group_scratch {
  std::vector<member_view> views;
  std::vector<std::vector<frame_slice>> by_member;
};

// Immutable but for its counters: a reload builds a new group over the members it keeps (each
// member is a whole consumer with its own queue, link and strand, so a slow member never holds
// up another) and the members then hand over to the new one. Routing threads call put(); the
// members call hand_over() and member_up() from their strands.
class consumer_group : public std::enable_shared_from_this<consumer_group> {
 public:
  consumer_group(std::string name, balance_policy balance,
                 std::vector<std::shared_ptr<consumer>> members);
  consumer_group(const consumer_group&) = delete;
  consumer_group& operator=(const consumer_group&) = delete;

  // Makes every member hand its failures over to this group (call once it is built).
  void adopt();

  // The router's entry, as consumer::put: each frame to one member, one put() per member
  // given frames. Allocates nothing in the steady state (the split is in `scratch`).
  consumer::put_result put(std::span<const frame_slice> frames,
                           const std::shared_ptr<flow_control_listener>& listener,
                           group_scratch& scratch, bool drain_here = true);

  // From `from`'s strand: whether another member is up (connected) to take its frames, or with
  // `keeping_up`, up and not congested (a member that fell behind hands its queue only to one
  // that keeps up; one that failed or left, to any that is up).
  bool other_up(const consumer* from, bool keeping_up) const noexcept;
  // From `from`'s strand: its frames, oldest first, with the reference each owns, go to the
  // other members by the group's balance, in front of their queues (first, in their order).
  void hand_over(const consumer* from, std::span<const frame_slice> frames);
  // From `up`'s strand: a member came up; the members that are down hand it what they hold.
  void member_up(const consumer* up);

  const std::string& name() const noexcept { return name_; }
  balance_policy balance() const noexcept { return balance_; }
  const std::vector<std::shared_ptr<consumer>>& members() const noexcept { return members_; }

 private:
  void read_members(std::vector<member_view>& views) const noexcept;
  // Each of `frames` to one member by the balance, into s.by_member (s.views: the members as
  // read, with what this split gave each). `skip`: a member never chosen (the one handing its
  // frames over), or members_.size() for none.
  void split(std::span<const frame_slice> frames, group_scratch& s, std::size_t skip);

  const std::string name_;
  const balance_policy balance_;
  const std::vector<std::shared_ptr<consumer>> members_;
  std::vector<std::uint64_t> seeds_;  // by member
  // Round-robin turns: one fetch_add per put batch, not per frame.
  std::atomic<std::uint64_t> turn_{0};
};

}  // namespace gatewayd::consumers
