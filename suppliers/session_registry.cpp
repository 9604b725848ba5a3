#include "suppliers/session_registry.hpp"

#include <algorithm>
#include <utility>

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

std::size_t session_registry::oldest_after(std::uint64_t after, std::size_t limit,
                                           std::vector<listed>& out) const {
  // A max-heap on the id: its front is the one to give up when a lower id comes.
  std::vector<std::pair<std::uint64_t, const entry*>> best;
  best.reserve(limit);
  std::size_t above = 0;
  std::lock_guard lock(mutex_);
  for (const auto& [_, e] : sessions_) {
    if (e.id <= after) continue;
    ++above;
    if (best.size() < limit) {
      best.emplace_back(e.id, &e);
      std::push_heap(best.begin(), best.end());
    } else if (limit > 0 && e.id < best.front().first) {
      std::pop_heap(best.begin(), best.end());
      best.back() = {e.id, &e};
      std::push_heap(best.begin(), best.end());
    }
  }
  std::sort_heap(best.begin(), best.end());
  // A session whose last owner becomes `out` ends (and leaves the map, taking the lock) only once
  // the caller lets it go, after the lock.
  out.reserve(out.size() + best.size());
  for (const auto& [id, e] : best) {
    if (auto s = e->session.lock()) out.push_back({id, std::move(s)});
  }
  return above;
}

}  // namespace gatewayd::suppliers
