#include "gateway/stop_deadline.hpp"

#include <system_error>

#include "runtime/thread_name.hpp"

namespace gatewayd::gateway {

stop_deadline::~stop_deadline() {
  ended();
  if (thread_.joinable()) thread_.join();
}

bool stop_deadline::arm(clock::time_point at, clock::duration leave_grace, actions what) {
  std::lock_guard lock(mutex_);
  if (phase_ != phase::idle) return true;
  try {
    thread_ = std::thread(
        [this, at, leave_grace, what = std::move(what)] { run(at, leave_grace, what); });
  } catch (const std::system_error&) {
    return false;
  }
  phase_ = phase::waiting;
  return true;
}

void stop_deadline::ended() {
  {
    std::lock_guard lock(mutex_);
    phase_ = phase::ended;
  }
  changed_.notify_all();
}

// The actions run without the lock: force() stops the pool, whose leaving calls ended().
void stop_deadline::run(clock::time_point at, clock::duration leave_grace, const actions& what) {
  runtime::name_this_thread("gw-stop-clock");
  std::unique_lock lock(mutex_);
  if (changed_.wait_until(lock, at, [this] { return phase_ == phase::ended; })) return;
  phase_ = phase::forced;
  lock.unlock();
  what.force();
  lock.lock();
  const auto leave_by = clock::now() + leave_grace;
  if (changed_.wait_until(lock, leave_by, [this] { return phase_ == phase::ended; })) return;
  lock.unlock();
  what.abandon();
}

}  // namespace gatewayd::gateway
