// SIGINT/SIGTERM as a flag the send and receive loops poll (no SA_RESTART, so a blocked
// system call returns EINTR and the loop sees the flag at once).
#pragma once

#include <atomic>
#include <csignal>

namespace gatewayd::tools {

inline std::atomic<bool>& stop_requested() noexcept {
  static std::atomic<bool> flag{false};
  return flag;
}

inline void install_stop_handlers() noexcept {
  struct sigaction sa {};
  sa.sa_handler = [](int) { stop_requested().store(true); };
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace gatewayd::tools
