// Pings the systemd watchdog from the gateway's own event loop, so that a wedged thread pool
// (no thread left to run handlers) stops the pings and systemd restarts the daemon.
#pragma once

#include <chrono>

#include "gateway/systemd_notify.hpp"
#include "runtime/executor.hpp"
#include "runtime/periodic_timer.hpp"

namespace gatewayd::gateway {

class watchdog {
 public:
  watchdog(const runtime::executor& ex, systemd_notify& notify);

  // Pings every half of the watchdog timeout systemd asked for; nothing when it asked none.
  void start();
  // Stops pinging (the io_context may then run out of work); callable from any thread.
  void stop();
  std::chrono::microseconds period() const noexcept { return period_; }

 private:
  systemd_notify& notify_;
  std::chrono::microseconds period_;
  // The pings run on a pool thread like every other event: if none is free for a whole
  // timeout, the ping is late and systemd acts.
  runtime::periodic_timer timer_;
};

}  // namespace gatewayd::gateway
