#include "gateway/notify_backlog.hpp"

#include <algorithm>

namespace gatewayd::gateway {

std::size_t notify_backlog::push(message m) {
  pending_.push_back(std::move(m));
  const std::size_t before = pending_.size();
  while (pending_.size() > max_pending && fold_one()) {
  }
  return before - pending_.size();
}

// What systemd has not read yet is history except for the newest message, which says the state
// now; the order of what stays never changes. Oldest first, one of:
// 1. A reload that began and ended while nothing could be sent (RELOADING directly followed by
//    its READY) goes whole: systemd is left in the state before it, which was READY, and the
//    newest message follows.
// 2. Otherwise a message of which a later one of the same kind waits (an older READY, STOPPING
//    or STATUS): the later one says the same with a newer STATUS line.
// After rule 2 at most one message of each kind is left, so the backlog never holds more than
// max_pending (> the four kinds).
bool notify_backlog::fold_one() {
  const auto newest = pending_.end() - 1;
  for (auto it = pending_.begin(); it + 1 < newest; ++it) {
    if (it->what == kind::reloading && (it + 1)->what == kind::ready) {
      pending_.erase(it, it + 2);
      return true;
    }
  }
  for (auto it = pending_.begin(); it != newest; ++it) {
    const auto later =
        std::find_if(it + 1, pending_.end(), [&](const message& m) { return m.what == it->what; });
    if (later != pending_.end()) {
      pending_.erase(it);
      return true;
    }
  }
  return false;
}

}  // namespace gatewayd::gateway
