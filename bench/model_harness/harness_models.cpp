#include "harness_models.hpp"

#include <algorithm>

#include "harness_supplier.hpp"
#include "runtime/thread_count.hpp"

namespace gatewayd::harness {

void handoff_queue::submit(std::shared_ptr<harness_session> session) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(session));
  }
  ready_.notify_one();
}

void handoff_queue::work() {
  for (;;) {
    std::shared_ptr<harness_session> next;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [this] { return stopped_ || !queue_.empty(); });
      if (stopped_) return;
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    next->route_handed_off();
  }
}

void handoff_queue::stop() {
  {
    std::lock_guard lock(mutex_);
    stopped_ = true;
    queue_.clear();
  }
  ready_.notify_all();
}

model_runner::model_runner(model which, asio::io_context& ioc, unsigned threads,
                           runtime::latency_histogram& promotion,
                           std::chrono::microseconds idle_poll)
    : which_(which),
      ioc_(ioc),
      threads_(runtime::thread_count(threads)),
      work_(ioc.get_executor()) {
  if (which_ == model::leader_followers) pool_.emplace(ioc_, threads_, promotion, idle_poll);
}

model_runner::~model_runner() {
  stop_and_join();
}

handoff_queue* model_runner::handoff() noexcept {
  return which_ == model::half_sync_half_async ? &handoff_ : nullptr;
}

void model_runner::start() {
  switch (which_) {
    case model::leader_followers:
      pool_->start();
      break;
    case model::asio_threads:
      for (unsigned i = 0; i < threads_; ++i)
        running_.emplace_back([this] { ioc_.run(); });
      break;
    case model::half_sync_half_async:
      running_.emplace_back([this] { ioc_.run(); });
      for (unsigned i = 1; i < std::max(threads_, 2u); ++i)
        running_.emplace_back([this] { handoff_.work(); });
      break;
  }
}

void model_runner::stop_and_join() {
  if (pool_) {
    pool_->stop();
    pool_->join();
  }
  handoff_.stop();
  ioc_.stop();
  for (auto& t : running_) {
    if (t.joinable()) t.join();
  }
}

std::optional<runtime::lf_pool::role_counts> model_runner::roles() const {
  if (!pool_) return std::nullopt;
  return pool_->roles();
}

}  // namespace gatewayd::harness
