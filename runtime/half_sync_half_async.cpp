#include "runtime/half_sync_half_async.hpp"

#include <algorithm>

#include "runtime/thread_count.hpp"

namespace gatewayd::runtime {

half_sync_half_async::half_sync_half_async(asio::io_context& ioc, unsigned threads)
    : ioc_(ioc), worker_count_(std::max(1u, thread_count(threads) - 1)) {}

half_sync_half_async::~half_sync_half_async() {
  stop();
  join();
}

void half_sync_half_async::start() {
  workers_.reserve(worker_count_);
  for (unsigned i = 0; i < worker_count_; ++i)
    workers_.emplace_back([this] { run_worker(); });
  io_thread_ = std::thread([this] { run_io(); });
}

void half_sync_half_async::stop() {
  ioc_.stop();
  end_workers();
}

void half_sync_half_async::join() {
  if (io_thread_.joinable()) io_thread_.join();
  for (auto& t : workers_) {
    if (t.joinable()) t.join();
  }
}

void half_sync_half_async::end_workers() {
  std::lock_guard lock(mutex_);
  done_ = true;
  work_ready_.notify_all();
}

void half_sync_half_async::run_io() {
  // A chunk out with a worker counts as work (see submit), so run() returns only once the
  // gateway has really stopped: then nothing is left for the workers either.
  {
    std::lock_guard lock(mutex_);
    io_running_ = true;
  }
  ioc_.run();
  {
    std::lock_guard lock(mutex_);
    io_running_ = false;
  }
  end_workers();
}

void half_sync_half_async::submit(std::shared_ptr<offloaded_work> work) {
  // Keeps the I/O thread's run() alive until the worker has posted its completion back.
  ioc_.get_executor().on_work_started();
  std::lock_guard lock(mutex_);
  if (idle_ == 0) ++queued_behind_busy_;
  queue_.push_back(std::move(work));
  work_ready_.notify_one();
}

void half_sync_half_async::run_worker() {
  std::unique_lock lock(mutex_);
  for (;;) {
    ++idle_;
    work_ready_.wait(lock, [&] { return head_ < queue_.size() || done_; });
    --idle_;
    if (head_ == queue_.size()) break;  // done_ and nothing left
    auto work = std::move(queue_[head_++]);
    if (head_ == queue_.size()) {
      queue_.clear();
      head_ = 0;
    } else if (head_ >= 64 && head_ * 2 >= queue_.size()) {
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
    ++busy_;
    lock.unlock();
    work->run_offloaded();  // posts its completion back to the I/O thread
    work.reset();
    ioc_.get_executor().on_work_finished();
    lock.lock();
    --busy_;
  }
}

execution_model::role_counts half_sync_half_async::roles() const {
  std::lock_guard lock(mutex_);
  role_counts r;
  r.leader = io_running_ ? 1 : 0;
  r.processing = busy_;
  r.follower = idle_;
  return r;
}

std::uint64_t half_sync_half_async::saturated() const {
  std::lock_guard lock(mutex_);
  return queued_behind_busy_;
}

}  // namespace gatewayd::runtime
