#include "tools/gateway_peer/sequence_tracker.hpp"

namespace gatewayd::tools {

sequence_tracker::sender_state* sequence_tracker::find(std::uint16_t id) {
  for (auto& s : senders_) {
    if (s.id == id) return last_ = &s;
  }
  senders_.reserve(senders_.size() < 16 ? 16 : senders_.size() * 2);
  senders_.push_back(sender_state{id, 0, false, {}});
  return last_ = &senders_.back();
}

void sequence_tracker::on_out_of_line(sender_state& s, std::uint64_t sequence) {
  if (!s.started && s.next == 0) {
    // The first frame of a sender that started before we listened: start counting from it.
    s.started = true;
    s.next = sequence + 1;
    return;
  }
  if (sequence > s.next) {
    const std::uint64_t gap = sequence - s.next;
    lost_ += gap;
    if (gap <= max_remembered_gap) {
      for (std::uint64_t m = s.next; m < sequence; ++m)
        s.missing.insert(m);
    }
    s.next = sequence + 1;
    return;
  }
  // sequence < next: a late frame filling a gap, or one seen before.
  if (s.missing.erase(sequence) != 0) {
    --lost_;
    ++reordered_;
  } else {
    ++duplicated_;
  }
}

}  // namespace gatewayd::tools
