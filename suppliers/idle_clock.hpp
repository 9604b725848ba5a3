// A supplier session's idle timeout: when it last made progress, since when it waits (paused,
// or owed confirms: never idle meanwhile), and the one timer that tells it when idle_timeout
// passed without progress.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <system_error>

namespace gatewayd::suppliers {

// What the clock asks of the session that owns it, on its strand.
class idle_clock_owner {
 public:
  // Kept alive by the clock's timer wait.
  virtual std::shared_ptr<void> keep_alive() = 0;
  // `idle` passed without progress, and it does not wait: the owner closes it as idle.
  virtual void idle_expired(std::chrono::steady_clock::duration idle) = 0;

 protected:
  ~idle_clock_owner() = default;
};

// The owner's strand only, but waiting_since(), which any thread may ask.
class idle_clock {
 public:
  using clock = std::chrono::steady_clock;

  // `timeout` 0: it never expires (progress and waits are kept all the same).
  idle_clock(const asio::any_io_executor& ex, idle_clock_owner& owner,
             std::chrono::milliseconds timeout);

  // Counts from now.
  void start();
  // For good: a wait already done does not re-arm it (the session closed).
  void stop() noexcept { timer_.expires_at(clock::time_point::min()); }
  // A whole frame came in.
  void progress() noexcept { last_progress_ = clock::now(); }
  // The session begins or ends a wait; its end counts as progress.
  void set_waiting(bool waits) noexcept;
  // Since when it waits, without a break; nothing when it does not.
  std::optional<clock::time_point> waiting_since() const noexcept {
    const auto at = waiting_at_.load(std::memory_order_relaxed);
    if (at == not_waiting) return std::nullopt;
    return clock::time_point(clock::duration(at));
  }

 private:
  static constexpr clock::rep not_waiting = std::numeric_limits<clock::rep>::min();
  // The timer is re-armed for the remainder when it expires instead of reset on every read:
  // reads stay cheap.
  void arm(clock::duration after);
  void on_timer(std::error_code ec);

  asio::steady_timer timer_;
  idle_clock_owner& owner_;
  const std::chrono::milliseconds timeout_;
  clock::time_point last_progress_;
  std::atomic<clock::rep> waiting_at_{not_waiting};  // steady-clock ticks; written on the strand
};

}  // namespace gatewayd::suppliers
