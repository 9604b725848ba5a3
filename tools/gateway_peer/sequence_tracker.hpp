// Per-sender sequence bookkeeping for one received stream: counts frames lost (a gap),
// reordered (a gap filled later) and duplicated (a sequence number seen twice).
#pragma once

#include <cstdint>
#include <set>
#include <vector>

namespace gatewayd::tools {

class sequence_tracker {
 public:
  void record(std::uint16_t sender_id, std::uint64_t sequence) noexcept {
    sender_state* s = last_;
    if (s == nullptr || s->id != sender_id) s = find(sender_id);
    if (sequence == s->next) {
      ++s->next;
      return;
    }
    on_out_of_line(*s, sequence);
  }

  std::uint64_t lost() const noexcept { return lost_; }
  std::uint64_t reordered() const noexcept { return reordered_; }
  std::uint64_t duplicated() const noexcept { return duplicated_; }
  std::size_t senders() const noexcept { return senders_.size(); }

 private:
  // Gaps this large are counted as lost without remembering each missing number.
  static constexpr std::uint64_t max_remembered_gap = 1u << 16;

  struct sender_state {
    std::uint16_t id = 0;
    std::uint64_t next = 0;
    bool started = false;
    std::set<std::uint64_t> missing;  // only touched when something went wrong
  };
  sender_state* find(std::uint16_t id);
  void on_out_of_line(sender_state& s, std::uint64_t sequence);

  std::vector<sender_state> senders_;
  sender_state* last_ = nullptr;
  std::uint64_t lost_ = 0;
  std::uint64_t reordered_ = 0;
  std::uint64_t duplicated_ = 0;
};

}  // namespace gatewayd::tools
