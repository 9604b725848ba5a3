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

std::uint64_t handshake_source_of(const asio::ip::address& a) noexcept {
  if (a.is_v4()) return 0xffff'0000'0000'0000ull | a.to_v4().to_uint();
  const auto v6 = a.to_v6();
  if (v6.is_v4_mapped())
    return handshake_source_of(asio::ip::make_address_v4(asio::ip::v4_mapped, v6));
  std::uint64_t prefix = 0;
  const auto bytes = v6.to_bytes();
  for (std::size_t i = 0; i < 8; ++i)
    prefix = prefix << 8 | bytes[i];
  return prefix;
}

std::uint64_t session_registry::handshake_to_evict_locked(std::uint64_t source) const {
  const std::size_t share = std::max<std::size_t>(1, max_handshakes_ / 4);
  if (const auto own = by_source_.find(source);
      own != by_source_.end() && own->second.all.size() >= share) {
    const auto& mine = own->second;
    return mine.silent.empty() ? *mine.all.begin() : *mine.silent.begin();
  }
  return silent_.empty() ? 0 : *silent_.begin();
}

std::function<void()> session_registry::forget_handshake_locked(std::uint64_t ticket) {
  const auto it = handshakes_.find(ticket);
  if (it == handshakes_.end()) return {};
  std::function<void()> evict = std::move(it->second.evict);
  silent_.erase(ticket);
  const auto source = by_source_.find(it->second.source);
  source->second.all.erase(ticket);
  source->second.silent.erase(ticket);
  if (source->second.all.empty()) by_source_.erase(source);
  handshakes_.erase(it);
  // Never empty for a ticket that was there: the caller tells "found" by it.
  if (!evict) evict = [] {};
  return evict;
}

std::uint64_t session_registry::begin_handshake(std::uint64_t source, std::function<void()> evict) {
  std::function<void()> evicted;
  std::uint64_t ticket = 0;
  {
    std::lock_guard lock(mutex_);
    if (!handshakes_.empty() && handshakes_.size() >= max_handshakes_) {
      const std::uint64_t victim = handshake_to_evict_locked(source);
      if (victim == 0) {
        evicted = std::move(evict);  // every slot is a handshake under way: the newcomer gives way
      } else {
        evicted = forget_handshake_locked(victim);
      }
    }
    if (evict) {
      ticket = next_ticket_++;
      handshakes_.emplace(ticket, handshake{source, std::move(evict)});
      silent_.insert(ticket);
      auto& mine = by_source_[source];
      mine.all.insert(ticket);
      mine.silent.insert(ticket);
    }
    publish_handshakes_locked();
  }
  if (evicted) evicted();
  return ticket;
}

void session_registry::handshake_progressed(std::uint64_t ticket) {
  std::lock_guard lock(mutex_);
  const auto it = handshakes_.find(ticket);
  if (it == handshakes_.end() || silent_.erase(ticket) == 0) return;  // gone, or marked already
  if (const auto source = by_source_.find(it->second.source); source != by_source_.end())
    source->second.silent.erase(ticket);
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
