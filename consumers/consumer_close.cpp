// How a consumer ends: drain what it holds for a bounded time, then close and report.
#include "consumers/consumer.hpp"

#include "runtime/log.hpp"

namespace gatewayd::consumers {

// ---------------------------------------------------------------------------------------------
// drain_and_close

void consumer::drain_and_close(std::chrono::milliseconds timeout, drop_reason reason,
                               std::function<void(std::uint64_t)> done) {
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
  }
  asio::post(strand_,
             [self = shared_from_this(), timeout, reason, done = std::move(done)]() mutable {
               self->begin_drain(timeout, reason, std::move(done));
             });
}

// A second call (a removal, then a shutdown) shares the first drain: it may only bring the
// deadline forward, and every `done` is called once with the same count.
void consumer::begin_drain(std::chrono::milliseconds timeout, drop_reason reason,
                           std::function<void(std::uint64_t)> done) {
  if (closed_) {
    if (done) done(0);
    return;
  }
  if (done) done_.push_back(std::move(done));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (!draining_ || deadline < drain_deadline_) {
    if (!draining_) drain_reason_ = reason;
    draining_ = true;
    drain_deadline_ = deadline;
    drain_timer_.expires_at(deadline);
    drain_timer_.async_wait(asio::bind_executor(
        strand_, [self = shared_from_this()](std::error_code ec) { self->on_drain_timer(ec); }));
  }
  {
    std::lock_guard lock(mutex_);
    collect_resumable_locked();
  }
  resume_collected();
  check_drain();
}

void consumer::on_drain_timer(std::error_code ec) {
  if (ec || finishing_) return;  // re-armed for an earlier deadline, or already finished
  finish_drain();
}

// Called whenever the drain may have progressed: finishes once the queue is empty and no
// write is out, or, after the deadline, once the write that was out has come back.
void consumer::check_drain() {
  if (!draining_ || closed_) return;
  bool idle = false;
  bool empty = false;
  {
    std::lock_guard lock(mutex_);
    idle = !writing_;
    empty = queue_.empty();
  }
  if (finishing_) {
    if (idle) complete_close();
  } else if (idle && empty) {
    finish_drain();
  }
}

void consumer::finish_drain() {
  if (finishing_) return;
  finishing_ = true;
  state_ = link_state::closed;
  ++dial_id_;
  redial_timer_.cancel();
  drain_timer_.cancel();
  {
    std::lock_guard lock(mutex_);
    connected_ = false;
  }
  close_link_socket();
  stats_.connected.store(false, std::memory_order_relaxed);
  check_drain();
}

void consumer::complete_close() {
  closed_ = true;
  frame_counts left;
  {
    std::lock_guard lock(mutex_);
    left = queue_.clear();
    publish_depth_locked();
    collect_resumable_locked();
  }
  if (opts_.budget) opts_.budget->release(left.bytes);
  if (left.frames) {
    stats_.dropped[static_cast<std::size_t>(drain_reason_)].fetch_add(left.frames,
                                                                      std::memory_order_relaxed);
  }
  resume_collected();
  GW_LOG(info) << "consumer " << name_ << " closed; " << left.frames << " frames undelivered ("
               << to_string(drain_reason_) << ")";
  auto done = std::move(done_);
  done_.clear();
  for (auto& d : done)
    d(left.frames);
}

}  // namespace gatewayd::consumers
