// The state messages for systemd that its notify socket has not taken yet, oldest first, kept
// within a small bound by folding history systemd no longer needs. Pure: no socket, no lock.
#pragma once

#include <cstddef>
#include <deque>
#include <string>

namespace gatewayd::gateway {

class notify_backlog {
 public:
  // WATCHDOG=1 is never kept: a ping that cannot go is replaced by the next tick's.
  enum class kind : unsigned char { ready, reloading, stopping, status };
  struct message {
    kind what = kind::status;
    std::string text;
  };

  // Enough for start-up, a reload in progress and a stop; more only while PID 1 does not read
  // through several reloads.
  static constexpr std::size_t max_pending = 8;

  bool empty() const noexcept { return pending_.empty(); }
  std::size_t size() const noexcept { return pending_.size(); }
  const message& front() const { return pending_.front(); }
  void pop_front() { pending_.pop_front(); }
  void clear() noexcept { pending_.clear(); }

  // Queues `m` behind every message already waiting (never ahead of one); past max_pending,
  // folds the oldest history (see fold_one()). Returns how many messages were folded away.
  std::size_t push(message m);

 private:
  bool fold_one();

  std::deque<message> pending_;
};

}  // namespace gatewayd::gateway
