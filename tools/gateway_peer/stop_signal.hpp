// SIGINT/SIGTERM as a flag the send and receive loops poll (no SA_RESTART, so a blocked
// system call returns EINTR and the loop sees the flag at once). A second signal also sets
// hard_stop(): it cuts short what the first lets finish (a confirm-mode sender's wait for its
// last confirms).
#pragma once

#include <atomic>
#include <csignal>

namespace gatewayd::tools {

inline std::atomic<bool>& stop_requested() noexcept {
  static std::atomic<bool> flag{false};
  return flag;
}

inline std::atomic<bool>& hard_stop() noexcept {
  static std::atomic<bool> flag{false};
  return flag;
}

inline void install_stop_handlers() noexcept {
  struct sigaction sa {};
  sa.sa_handler = [](int) {
    if (stop_requested().exchange(true)) hard_stop().store(true);
  };
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace gatewayd::tools
