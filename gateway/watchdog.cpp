#include "gateway/watchdog.hpp"

namespace gatewayd::gateway {

watchdog::watchdog(const runtime::executor& ex, systemd_notify& notify)
    : notify_(notify),
      period_(notify.watchdog_timeout() / 2),
      timer_(ex, period_, [this] { notify_.watchdog(); }) {}

void watchdog::start() {
  if (period_.count() == 0) return;
  notify_.watchdog();
  timer_.start();
}

void watchdog::stop() {
  timer_.stop();
}

}  // namespace gatewayd::gateway
