#include "suppliers/session_registry.hpp"

#include "suppliers/supplier_session.hpp"

namespace gatewayd::suppliers {

session_registry::entry* session_registry::longest_paused_locked() {
  entry* oldest = nullptr;
  std::chrono::steady_clock::time_point oldest_since{};
  for (auto& [session, e] : sessions_) {
    if (!e.placed) continue;
    const auto since = session->paused_by_consumer_since();
    if (since && (!oldest || *since < oldest_since)) {
      oldest = &e;
      oldest_since = *since;
    }
  }
  if (oldest) {
    oldest->placed = false;
    --places_;
  }
  return oldest;
}

bool session_registry::reclaim_longest_paused() {
  // A hint, read without the lock: a pause that begins meanwhile is not waited for (the next
  // connection at the cap finds it).
  if (paused_.load(std::memory_order_relaxed) <= 0) return false;
  std::shared_ptr<supplier_session> victim;
  {
    std::lock_guard lock(mutex_);
    entry* oldest = longest_paused_locked();
    if (!oldest) return false;
    victim = oldest->session.lock();
  }
  // Null: its last owner let it go meanwhile and its destructor waits for the lock to leave the
  // map; its place is free all the same. Released outside the lock, which its destructor takes.
  if (victim) victim->reclaim();
  return true;
}

bool session_registry::take_place(const supplier_session* s) {
  std::shared_ptr<supplier_session> victim;
  {
    std::lock_guard lock(mutex_);
    const auto it = sessions_.find(s);
    if (it == sessions_.end()) return false;
    if (it->second.placed) return true;
    if (places_ >= max_places_) {
      entry* oldest =
          paused_.load(std::memory_order_relaxed) > 0 ? longest_paused_locked() : nullptr;
      if (!oldest) return false;
      victim = oldest->session.lock();
    }
    it->second.placed = true;
    ++places_;
  }
  if (victim) victim->reclaim();
  return true;
}

std::uint64_t session_registry::begin_handshake(std::function<void()> evict) {
  std::function<void()> evicted;
  std::uint64_t ticket = 0;
  {
    std::lock_guard lock(mutex_);
    if (!handshakes_.empty() && handshakes_.size() >= max_handshakes_) {
      const auto oldest = handshakes_.begin();
      evicted = std::move(oldest->second);
      handshakes_.erase(oldest);
    }
    ticket = next_ticket_++;
    handshakes_.emplace(ticket, std::move(evict));
    publish_handshakes_locked();
  }
  if (evicted) evicted();
  return ticket;
}

}  // namespace gatewayd::suppliers
