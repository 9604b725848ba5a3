// The live supplier sessions, so the gateway can stop or pause them all and the connection cap
// can reclaim a paused one; touched on connect and disconnect, never on the data path.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace gatewayd::suppliers {

class supplier_session;

class session_registry {
 public:
  void add(const std::shared_ptr<supplier_session>& s) {
    std::lock_guard lock(mutex_);
    sessions_.emplace(s.get(), entry{s});
  }
  // From the session's destructor, before any of its members goes: while the lock is held,
  // every session in the map is whole (reclaim_longest_paused() reads them through their keys).
  void remove(const supplier_session* s) {
    std::lock_guard lock(mutex_);
    const auto it = sessions_.find(s);
    if (it == sessions_.end()) return;
    if (it->second.reclaimed) --reclaimed_;
    sessions_.erase(it);
  }
  // Live sessions (a stop waits for none to be left).
  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return sessions_.size();
  }
  // The places under max_supplier_connections they hold: a reclaimed session's place is free
  // from the moment it is chosen, though its close, on its own strand, completes later.
  std::size_t places_taken() const {
    std::lock_guard lock(mutex_);
    return sessions_.size() - reclaimed_;
  }
  // At the cap: chooses the session that has waited longest for a stalled backpressure consumer
  // (supplier_session::paused_by_consumer_since: not one paused for a moment, held by the
  // gateway's stop, or still in its handshake), counts its place as free and closes it
  // (supplier_session::reclaim). False when no session waits so. Each session is chosen once,
  // so connections arriving together take different places. A scan of every live session under
  // the lock, only at the cap and only while one waits so: a flood of connections at a cap of
  // sessions being read costs no scan.
  bool reclaim_longest_paused();
  // A session's wait for a stalled consumer began (+1) or ended (-1): once per pause, not per
  // frame.
  void count_paused(bool began) noexcept {
    if (began) {
      paused_.fetch_add(1, std::memory_order_relaxed);
    } else {
      paused_.fetch_sub(1, std::memory_order_relaxed);
    }
  }
  // Calls f on every live session (outside the lock, so f may close them).
  void for_each(const std::function<void(supplier_session&)>& f) const {
    std::vector<std::shared_ptr<supplier_session>> live;
    {
      std::lock_guard lock(mutex_);
      live.reserve(sessions_.size());
      for (const auto& [_, e] : sessions_) {
        if (auto s = e.session.lock()) live.push_back(std::move(s));
      }
    }
    for (const auto& s : live)
      f(*s);
  }

 private:
  struct entry {
    std::weak_ptr<supplier_session> session;
    bool reclaimed = false;  // its place was given away; it is closing
  };
  mutable std::mutex mutex_;
  std::unordered_map<const supplier_session*, entry> sessions_;
  std::size_t reclaimed_ = 0;              // entries with `reclaimed` set
  std::atomic<std::ptrdiff_t> paused_{0};  // sessions waiting for a stalled consumer now
};

}  // namespace gatewayd::suppliers
