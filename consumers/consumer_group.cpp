#include "consumers/consumer_group.hpp"

namespace gatewayd::consumers {

consumer_group::consumer_group(std::string name, balance_policy balance,
                               std::vector<std::shared_ptr<consumer>> members)
    : name_(std::move(name)), balance_(balance), members_(std::move(members)) {
  seeds_.reserve(members_.size());
  for (const auto& m : members_)
    seeds_.push_back(member_seed(m->member()));
}

void consumer_group::adopt() {
  for (const auto& m : members_)
    m->join(weak_from_this());
}

void consumer_group::read_members(std::vector<member_view>& views) const noexcept {
  views.resize(members_.size());
  for (std::size_t i = 0; i < members_.size(); ++i) {
    const auto& st = members_[i]->stats();
    auto& v = views[i];
    v.connected = st.connected.load(std::memory_order_relaxed);
    // A member behind (congested) is passed over while another keeps up: its policy would
    // drop what it is given. Not under backpressure, which drops nothing: such a member takes
    // its turn until its queue is at its limits (its room), or a group whose members are all
    // loaded in turn would starve each one as it falls behind for a moment.
    v.live = v.connected && (!st.congested.load(std::memory_order_relaxed) ||
                             members_[i]->policy() == overflow_policy::backpressure);
    v.depth = st.queued_frames.load(std::memory_order_relaxed);
    v.room = !st.at_pause_mark.load(std::memory_order_relaxed);
    v.seed = seeds_[i];
  }
}

consumer::put_result consumer_group::put(std::span<const frame_slice> frames,
                                         const std::shared_ptr<flow_control_listener>& listener,
                                         group_scratch& s, bool drain_here) {
  consumer::put_result result;
  if (frames.empty() || members_.empty()) return result;
  if (members_.size() == 1) return members_[0]->put(frames, listener, drain_here);
  split(frames, s, members_.size());
  for (std::size_t i = 0; i < members_.size(); ++i) {
    auto& batch = s.by_member[i];
    if (batch.empty()) continue;
    const auto r = members_[i]->put(batch, listener, drain_here);
    result.queued += r.queued;
    // The group is behind only where a member with no room had to be given frames (none had
    // room, or `address` keeps an address on it). One that reached its mark in this batch while
    // others had room is passed over from the next batch on; the supplier it listed is resumed
    // by whichever member drains first, and re-paused if the group is still full.
    if (!s.views[i].room) {
      result.pause_supplier = result.pause_supplier || r.pause_supplier;
      result.paused_by_consumer = result.paused_by_consumer || r.paused_by_consumer;
    }
    result.wrote = result.wrote || r.wrote;
    batch.clear();
  }
  return result;
}

void consumer_group::split(std::span<const frame_slice> frames, group_scratch& s,
                           std::size_t skip) {
  read_members(s.views);
  if (skip < members_.size()) {
    s.views[skip].live = false;
    s.views[skip].connected = false;
  }
  if (s.by_member.size() < members_.size()) s.by_member.resize(members_.size());
  const candidates c = pick_candidates(s.views, balance_);
  std::uint64_t turn = balance_ == balance_policy::address
                           ? 0
                           : turn_.fetch_add(frames.size(), std::memory_order_relaxed);
  for (const auto& f : frames) {
    const std::uint64_t h =
        balance_ == balance_policy::address ? hash_address(frame_address(f)) : 0;
    const std::size_t i = choose_member(s.views, balance_, c, turn++, h, skip);
    s.by_member[i].push_back(f);
    ++s.views[i].depth;
  }
}

bool consumer_group::other_up(const consumer* from, bool keeping_up) const noexcept {
  for (const auto& m : members_) {
    if (m.get() == from || !m->stats().connected.load(std::memory_order_relaxed)) continue;
    if (!keeping_up || !m->stats().congested.load(std::memory_order_relaxed)) return true;
  }
  return false;
}

void consumer_group::hand_over(const consumer* from, std::span<const frame_slice> frames) {
  if (frames.empty()) return;
  // Not the routing threads' scratch: a member's strand may run on one of them, inside nothing
  // of theirs, but a handover is rare and may allocate.
  group_scratch s;
  std::size_t skip = members_.size();
  for (std::size_t i = 0; i < members_.size(); ++i) {
    if (members_[i].get() == from) skip = i;
  }
  split(frames, s, skip);
  for (std::size_t i = 0; i < members_.size(); ++i) {
    if (!s.by_member[i].empty()) members_[i]->take_over(s.by_member[i]);
  }
}

void consumer_group::member_up(const consumer* up) {
  for (const auto& m : members_) {
    if (m.get() != up) m->hand_over_if_down();
  }
}

}  // namespace gatewayd::consumers
