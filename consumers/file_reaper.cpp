#include "consumers/file_reaper.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "runtime/log.hpp"
#include "runtime/thread_name.hpp"

namespace gatewayd::consumers {

file_reaper::file_reaper() : thread_([this] { run(); }) {}

file_reaper::~file_reaper() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void file_reaper::remove(std::filesystem::path path) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(path));
  }
  wake_.notify_one();
}

void file_reaper::wait_idle() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

std::uint64_t file_reaper::errors() const {
  std::lock_guard lock(mutex_);
  return errors_;
}

void file_reaper::run() {
  runtime::name_this_thread("gw-reaper");
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping, and nothing left
    const std::filesystem::path path = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    const int failed = ::unlink(path.c_str()) != 0 && errno != ENOENT ? errno : 0;
    if (failed) {
      GW_LOG_LIMITED(error, "spool unlink errors")
          << "spool: unlink " << path.string() << ": " << std::strerror(failed)
          << "; the file is removed when its spool is next opened";
    }
    lock.lock();
    if (failed) ++errors_;
    busy_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

}  // namespace gatewayd::consumers
