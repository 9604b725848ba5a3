// Tells systemd what the daemon is doing (READY, RELOADING, STOPPING, STATUS, WATCHDOG) over
// its notify socket without ever blocking the caller; a no-op when not run by systemd.
#pragma once

#include <asio.hpp>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "gateway/notify_backlog.hpp"
#include "gateway/notify_socket.hpp"
#include "runtime/executor.hpp"

namespace gatewayd::gateway {

// Any thread may call it, and none waits for PID 1: a message goes at once (MSG_DONTWAIT) or,
// when systemd's socket is full, a state message is kept in order and retried by a timer on
// `ex` until it goes, while a watchdog ping is dropped (the next tick sends one).
class systemd_notify {
 public:
  // How often waiting state messages are tried again while the socket stays full.
  static constexpr std::chrono::milliseconds retry_period{50};

  // Reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID once (as systemd set them for this
  // process; the environment is left as it is) and opens the socket.
  explicit systemd_notify(const runtime::executor& ex);
  // Cancels a retry still armed: the io_context must not run it after this.
  ~systemd_notify();
  systemd_notify(const systemd_notify&) = delete;
  systemd_notify& operator=(const systemd_notify&) = delete;

  // True when there is a notify socket to talk to.
  bool enabled() const noexcept { return socket_.is_open(); }
  // WatchdogSec as systemd passed it (WATCHDOG_USEC), or zero when no watchdog is asked for.
  std::chrono::microseconds watchdog_timeout() const noexcept { return watchdog_timeout_; }

  // Start-up finished, or a reload finished (successfully or not): serving again.
  void ready(std::string_view status) noexcept;
  // A reload starts; MONOTONIC_USEC lets systemd match it to the `systemctl reload` it ran.
  void reloading(std::string_view status) noexcept;
  // The graceful stop starts: systemd now waits for the exit instead of expecting pings.
  void stopping(std::string_view status) noexcept;
  void status(std::string_view status) noexcept;
  // "Still alive": must arrive within every watchdog_timeout().
  void watchdog() noexcept;

  // The stop is over: one last try, then what still waits is given up (logged) and no retry is
  // armed again, so the io_context can run out of work. systemd sees the exit itself.
  void stop() noexcept;

  // State messages waiting for room in the socket, and watchdog pings dropped for want of it.
  std::size_t pending() const;
  std::uint64_t watchdog_dropped() const;

 private:
  // Where the retry timer stands; changed under mutex_ only.
  enum class retry_state : unsigned char { idle, armed, stopped };

  void queue(notify_backlog::kind what, std::string text) noexcept;
  // Sends what waits, oldest first, until the socket is full; false when something still waits.
  // A message that fails otherwise is dropped, its failure left in `failure` to report.
  bool flush_locked(notify_socket::result& failure) noexcept;
  void arm_retry_locked();
  void on_retry(std::error_code ec) noexcept;
  void report_failure(const notify_socket::result& r) const noexcept;

  notify_socket socket_;
  std::chrono::microseconds watchdog_timeout_{0};
  // Taken for one non-blocking send or a few, never across a wait: it keeps the state messages
  // in the order they were said whichever threads say them.
  mutable std::mutex mutex_;
  notify_backlog backlog_;
  asio::steady_timer retry_;
  retry_state retry_state_ = retry_state::idle;
  std::uint64_t watchdog_dropped_ = 0;
};

}  // namespace gatewayd::gateway
