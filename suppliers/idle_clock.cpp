#include "suppliers/idle_clock.hpp"

namespace gatewayd::suppliers {

idle_clock::idle_clock(const asio::any_io_executor& ex, idle_clock_owner& owner,
                       std::chrono::milliseconds timeout)
    : timer_(ex), owner_(owner), timeout_(timeout) {}

void idle_clock::start() {
  progress();
  if (timeout_.count() > 0) arm(timeout_);
}

void idle_clock::set_waiting(bool waits) noexcept {
  const bool waited = waiting_at_.load(std::memory_order_relaxed) != not_waiting;
  if (waits == waited) return;
  const auto now = clock::now();
  waiting_at_.store(waits ? now.time_since_epoch().count() : not_waiting,
                    std::memory_order_relaxed);
  if (!waits) last_progress_ = now;
}

void idle_clock::arm(clock::duration after) {
  timer_.expires_after(after);
  timer_.async_wait([self = owner_.keep_alive(), this](std::error_code ec) { on_timer(ec); });
}

void idle_clock::on_timer(std::error_code ec) {
  if (ec || timer_.expiry() == clock::time_point::min()) return;  // stopped
  // A session that waits, paused or for confirms, is not idle: closing it would only make its
  // supplier resend what the gateway holds already. A peer that is gone is TCP liveness's to
  // find, and a full connection cap reclaims the session paused longest.
  if (waiting_since()) return arm(timeout_);
  const auto idle = clock::now() - last_progress_;
  if (idle < timeout_) return arm(timeout_ - idle);
  owner_.idle_expired(idle);
}

}  // namespace gatewayd::suppliers
