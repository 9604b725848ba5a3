#include "tools/traffic/stream_table.hpp"

#include <utility>

namespace gatewayd::traffic {

sequence_window& stream_table::add(std::uint64_t key) {
  if ((size_ + 1) * 2 > slots_.size()) {
    // At most half full keeps probe runs short; rehashing moves every window.
    std::vector<slot> old(slots_.size() * 2);
    old.swap(slots_);
    size_ = 0;
    for (auto& s : old)
      if (s.key_plus_one != 0) add(s.key_plus_one - 1) = s.window;
  }
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = hash(key) & mask;
  while (slots_[i].key_plus_one != 0)
    i = (i + 1) & mask;
  slots_[i].key_plus_one = key + 1;
  ++size_;
  return slots_[i].window;
}

}  // namespace gatewayd::traffic
