// Runs a function every period on the pool's own threads until stopped (the watchdog ping,
// reporting suppressed log lines); a tick that runs late does not push later ticks back.
#pragma once

#include <asio.hpp>
#include <chrono>
#include <functional>

#include "runtime/executor.hpp"

namespace gatewayd::runtime {

class periodic_timer {
 public:
  periodic_timer(const executor& ex, std::chrono::steady_clock::duration period,
                 std::function<void()> tick);

  // Both callable from any thread; after stop() no tick runs and the timer holds no work, so
  // the io_context can run out of it.
  void start();
  void stop();

 private:
  void do_wait();

  strand strand_;  // the timer and the flag are touched only here
  asio::steady_timer timer_;
  std::chrono::steady_clock::duration period_;
  std::function<void()> tick_;
  bool stopped_ = false;
};

}  // namespace gatewayd::runtime
