#include "suppliers/session_registry.hpp"

#include "suppliers/supplier_session.hpp"

namespace gatewayd::suppliers {

bool session_registry::reclaim_longest_paused() {
  // A hint, read without the lock: a pause that begins meanwhile is not waited for (the next
  // connection at the cap finds it).
  if (paused_.load(std::memory_order_relaxed) <= 0) return false;
  std::shared_ptr<supplier_session> victim;
  {
    std::lock_guard lock(mutex_);
    entry* oldest = nullptr;
    std::chrono::steady_clock::time_point oldest_since{};
    for (auto& [session, e] : sessions_) {
      if (e.reclaimed) continue;
      const auto since = session->paused_by_consumer_since();
      if (since && (!oldest || *since < oldest_since)) {
        oldest = &e;
        oldest_since = *since;
      }
    }
    if (!oldest) return false;
    oldest->reclaimed = true;
    ++reclaimed_;
    victim = oldest->session.lock();
  }
  // Null: its last owner let it go meanwhile and its destructor waits for the lock to leave the
  // map; its place is free all the same. Released outside the lock, which its destructor takes.
  if (victim) victim->reclaim();
  return true;
}

}  // namespace gatewayd::suppliers
