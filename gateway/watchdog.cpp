#include "gateway/watchdog.hpp"

namespace gatewayd::gateway {

watchdog::watchdog(const runtime::executor& ex, const systemd_notify& notify)
    : strand_(runtime::make_strand(ex)),
      timer_(strand_),
      notify_(notify),
      period_(notify.watchdog_timeout() / 2) {}

void watchdog::start() {
  if (period_.count() == 0) return;
  asio::post(strand_, [this] {
    if (stopped_) return;
    notify_.watchdog();
    timer_.expires_after(period_);
    do_wait();
  });
}

void watchdog::stop() {
  asio::post(strand_, [this] {
    stopped_ = true;
    timer_.cancel();
  });
}

void watchdog::do_wait() {
  // The handler runs on a pool thread like every other event: if none is free for a whole
  // timeout, the ping is late and systemd acts.
  timer_.async_wait([this](std::error_code ec) { on_wait(ec); });
}

void watchdog::on_wait(std::error_code ec) {
  if (ec || stopped_) return;
  notify_.watchdog();
  // Fixed rate, not fixed delay: a late handler does not push every later ping back.
  timer_.expires_at(timer_.expiry() + period_);
  if (timer_.expiry() < asio::steady_timer::clock_type::now()) timer_.expires_after(period_);
  do_wait();
}

}  // namespace gatewayd::gateway
