#include "gateway/systemd_notify.hpp"

#include <systemd/sd-daemon.h>

#include <cstdint>
#include <cstdlib>
#include <ctime>

#include "runtime/log.hpp"

namespace gatewayd::gateway {
namespace {

// STATUS= is one line: a newline would start a new assignment in the datagram.
std::string status_line(std::string_view status) {
  std::string s = "STATUS=";
  for (char c : status)
    s += (c == '\n' ? ' ' : c);
  return s;
}

std::uint64_t monotonic_usec() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000u +
         static_cast<std::uint64_t>(ts.tv_nsec) / 1000u;
}

}  // namespace

systemd_notify::systemd_notify() {
  std::uint64_t usec = 0;
  // Not unsetting the environment: the tests' and systemd's WATCHDOG_PID checks stay valid.
  if (sd_watchdog_enabled(0, &usec) > 0) watchdog_timeout_ = std::chrono::microseconds(usec);
}

bool systemd_notify::enabled() const noexcept {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  return socket && *socket;
}

void systemd_notify::ready(std::string_view status) const noexcept {
  try {
    send("READY=1\n" + status_line(status));
  } catch (...) {
  }
}

void systemd_notify::reloading(std::string_view status) const noexcept {
  try {
    std::string s = "RELOADING=1\nMONOTONIC_USEC=";
    s += std::to_string(monotonic_usec());
    s += '\n';
    s += status_line(status);
    send(s);
  } catch (...) {
  }
}

void systemd_notify::stopping(std::string_view status) const noexcept {
  try {
    send("STOPPING=1\n" + status_line(status));
  } catch (...) {
  }
}

void systemd_notify::status(std::string_view status) const noexcept {
  try {
    send(status_line(status));
  } catch (...) {
  }
}

void systemd_notify::watchdog() const noexcept {
  try {
    send("WATCHDOG=1");
  } catch (...) {
  }
}

void systemd_notify::send(const std::string& state) const noexcept {
  if (!enabled()) return;
  // libsystemd speaks the whole protocol: abstract and path sockets, credentials, and the
  // datagram size rules; a failure is logged but never stops the gateway.
  const int r = sd_notify(0, state.c_str());
  if (r < 0) {
    GW_LOG(warning) << "sd_notify failed: error " << -r;
  }
}

}  // namespace gatewayd::gateway
