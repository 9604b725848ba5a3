// Keeps the stop's hard deadline on a thread of its own, so that nothing holding up the pool's
// threads (a blocked call, a handler that never returns) can hold up the end of a stop.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace gatewayd::gateway {

class stop_deadline {
 public:
  using clock = std::chrono::steady_clock;
  struct actions {
    // At the deadline, if the stop has not ended: say what was left and stop the pool.
    std::function<void()> force;
    // `leave_grace` after force(), if the pool's threads still have not left: end the process.
    std::function<void()> abandon;
  };

  stop_deadline() = default;
  ~stop_deadline();  // ended(), then joins the thread
  stop_deadline(const stop_deadline&) = delete;
  stop_deadline& operator=(const stop_deadline&) = delete;

  // Starts the thread, once (a later call is ignored): it waits until `at` for ended(). False
  // when no thread could be started (the process is out of threads): there is no deadline.
  bool arm(clock::time_point at, clock::duration leave_grace, actions what);
  // The pool's threads have left: the stop is over, in time or forced. Any thread.
  void ended();

 private:
  // What the deadline's thread is doing; changed under mutex_ only.
  enum class phase : unsigned char { idle, waiting, forced, ended };

  void run(clock::time_point at, clock::duration leave_grace, const actions& what);

  std::mutex mutex_;
  std::condition_variable changed_;
  phase phase_ = phase::idle;
  std::thread thread_;
};

}  // namespace gatewayd::gateway
