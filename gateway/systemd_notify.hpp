// Tells systemd what the daemon is doing (READY, RELOADING, STOPPING, STATUS, WATCHDOG) over
// the NOTIFY_SOCKET protocol; every call is a no-op when the daemon is not run by systemd.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace gatewayd::gateway {

class systemd_notify {
 public:
  // Reads WATCHDOG_USEC once; NOTIFY_SOCKET is read by each send (libsystemd's rule).
  systemd_notify();

  // True when NOTIFY_SOCKET is set: someone listens to what we say.
  bool enabled() const noexcept;
  // WatchdogSec as systemd passed it (WATCHDOG_USEC), or zero when no watchdog is asked for.
  std::chrono::microseconds watchdog_timeout() const noexcept { return watchdog_timeout_; }

  // Start-up finished, or a reload finished (successfully or not): serving again.
  void ready(std::string_view status) const noexcept;
  // A reload starts; MONOTONIC_USEC lets systemd match it to the `systemctl reload` it ran.
  void reloading(std::string_view status) const noexcept;
  // The graceful stop starts: systemd now waits for the exit instead of expecting pings.
  void stopping(std::string_view status) const noexcept;
  void status(std::string_view status) const noexcept;
  // "Still alive": must arrive within every watchdog_timeout().
  void watchdog() const noexcept;

 private:
  void send(const std::string& state) const noexcept;

  std::chrono::microseconds watchdog_timeout_{0};
};

}  // namespace gatewayd::gateway
