// The live supplier sessions and the connections still in their handshake, so the gateway can
// stop or pause them all, the connection cap can reclaim a paused one and the handshake cap evict
// the oldest handshake; touched on connect, handshake and disconnect, never on the data path.
#pragma once

#include <asio/ip/address.hpp>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

namespace gatewayd::suppliers {

class supplier_session;

// What a handshake's share of the slots is counted by: an IPv4 address, or an IPv6 /64 (the
// block one host is usually given). The PROXY header's source where a balancer sends one.
std::uint64_t handshake_source_of(const asio::ip::address& a) noexcept;

class session_registry {
 public:
  // max_supplier_connections (the places sessions hold once they may send frames) and
  // max_handshaking_connections (connections still in their TLS handshake or PROXY header,
  // which hold no place). Before any session; unlimited until then. `gauge`, if given, is kept
  // at the number of handshakes (for /metrics).
  void limit(std::size_t places, std::size_t handshakes,
             std::atomic<std::int64_t>* gauge = nullptr) {
    std::lock_guard lock(mutex_);
    max_places_ = places;
    max_handshakes_ = handshakes;
    handshakes_gauge_ = gauge;
  }
  // `placed`: it holds a place from the start (a plaintext session, admitted under the cap by
  // the acceptor); a TLS session takes one when its handshake is done (take_place).
  void add(const std::shared_ptr<supplier_session>& s, bool placed = true) {
    std::lock_guard lock(mutex_);
    sessions_.emplace(s.get(), entry{s, placed, ++last_id_});
    if (placed) ++places_;
  }
  // From the session's destructor, before any of its members goes: while the lock is held,
  // every session in the map is whole (reclaim_longest_paused() reads them through their keys).
  void remove(const supplier_session* s) {
    std::lock_guard lock(mutex_);
    const auto it = sessions_.find(s);
    if (it == sessions_.end()) return;
    if (it->second.placed) --places_;
    sessions_.erase(it);
  }
  // Live sessions (a stop waits for none to be left).
  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return sessions_.size();
  }
  // The places under max_supplier_connections they hold: a reclaimed session's place is free
  // from the moment it is chosen, though its close, on its own strand, completes later; a
  // session still in its handshake holds none.
  std::size_t places_taken() const {
    std::lock_guard lock(mutex_);
    return places_;
  }
  // A place for one more connection (the acceptor's, one connection at a time): free under
  // max_supplier_connections, or given up by the session paused longest.
  bool room_for_one() { return places_taken() < max_places() || reclaim_longest_paused(); }
  // A TLS session whose handshake is done takes its place the same way, from its own strand
  // (so under the lock: two handshakes ending together never take one place twice). False: the
  // cap is full and no session waits for a stalled consumer; the session is refused.
  bool take_place(const supplier_session* s);
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

  // Connections still in their handshake (TLS, or the PROXY header), oldest first: they hold no
  // place, so unauthenticated ones never keep an authenticated supplier out; their own cap,
  // max_handshaking_connections, bounds them. At that cap a new connection from `source`
  // (handshake_source_of) takes the slot of, in this order:
  //   1. its own source's oldest handshake that has sent nothing yet, else its own source's
  //      oldest, when that source holds a share of the slots already (a quarter of them, at
  //      least one): a host flooding the port evicts its own connections, nobody else's;
  //   2. else the oldest handshake, of any source, that has sent nothing yet;
  //   3. else none: every slot is a handshake under way, and the newcomer (which has sent
  //      nothing) gives way itself.
  // A handshake under way (handshake_progressed: its first bytes arrived) is never evicted for a
  // connection that has sent nothing. The evicted one's `evict` is called (outside the lock; it
  // must post to the connection's strand, which counts and closes it unless its handshake ended
  // meanwhile). Returns the ticket for handshake_progressed and end_handshake; 0 when the
  // newcomer gave way (its own `evict` was called).
  std::uint64_t begin_handshake(std::uint64_t source, std::function<void()> evict);
  // Its first bytes arrived (a ClientHello under way): it no longer gives its slot up to
  // connections that have sent nothing. A ticket already evicted (or 0) is ignored.
  void handshake_progressed(std::uint64_t ticket);
  // Its handshake ended (done, failed, timed out, or the connection closed); a ticket already
  // evicted is ignored.
  void end_handshake(std::uint64_t ticket) {
    std::lock_guard lock(mutex_);
    if (forget_handshake_locked(ticket)) publish_handshakes_locked();
  }
  std::size_t handshaking() const {
    std::lock_guard lock(mutex_);
    return handshakes_.size();
  }

  // A session as /connz lists it: its id (1, 2, 3, ... in the order sessions were added, never
  // reused: oldest first is lowest first, and the last one listed is a cursor for the next page).
  struct listed {
    std::uint64_t id;
    std::shared_ptr<supplier_session> session;
  };
  // Appends to `out` the `limit` live sessions with the lowest ids above `after`, lowest first;
  // returns how many live sessions have an id above `after`. One walk under the lock keeps only
  // the `limit` best in a heap (n log limit compares, `limit` entries), whatever n is.
  std::size_t oldest_after(std::uint64_t after, std::size_t limit, std::vector<listed>& out) const;

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
    bool placed = true;    // it holds a place (not reclaimed, handshake done)
    std::uint64_t id = 0;  // from last_id_, when added
  };
  std::size_t max_places() const {
    std::lock_guard lock(mutex_);
    return max_places_;
  }
  // Chooses the placed session paused longest, marks its place free; null when none waits so.
  entry* longest_paused_locked();
  void publish_handshakes_locked() noexcept {
    if (handshakes_gauge_) {
      handshakes_gauge_->store(static_cast<std::int64_t>(handshakes_.size()),
                               std::memory_order_relaxed);
    }
  }

  mutable std::mutex mutex_;
  std::unordered_map<const supplier_session*, entry> sessions_;
  std::size_t places_ = 0;     // entries with `placed` set
  std::uint64_t last_id_ = 0;  // the id of the session added last
  std::size_t max_places_ = std::numeric_limits<std::size_t>::max();
  std::size_t max_handshakes_ = std::numeric_limits<std::size_t>::max();
  struct handshake {
    std::uint64_t source = 0;
    std::function<void()> evict;
  };
  // A source's handshakes, by ticket (oldest first), and those of them that have sent nothing.
  struct source_handshakes {
    std::set<std::uint64_t> all, silent;
  };
  // The ticket whose slot a newcomer from `source` takes at the cap (begin_handshake's rules);
  // 0: none, the newcomer gives way.
  std::uint64_t handshake_to_evict_locked(std::uint64_t source) const;
  // Takes the ticket out of every index; its evict callback, or an empty one if it was not there.
  std::function<void()> forget_handshake_locked(std::uint64_t ticket);

  std::map<std::uint64_t, handshake> handshakes_;  // by ticket: oldest first
  std::set<std::uint64_t> silent_;  // tickets whose first bytes have not arrived, oldest first
  std::unordered_map<std::uint64_t, source_handshakes> by_source_;
  std::uint64_t next_ticket_ = 1;
  std::atomic<std::int64_t>* handshakes_gauge_ = nullptr;
  std::atomic<std::ptrdiff_t> paused_{0};  // sessions waiting for a stalled consumer now
};

}  // namespace gatewayd::suppliers
