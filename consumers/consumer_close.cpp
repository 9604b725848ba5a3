// How a consumer ends: drain what it holds for a bounded time, then close and report.
#include <cassert>

#include "consumers/consumer.hpp"
#include "runtime/log.hpp"

namespace gatewayd::consumers {

void consumer::drain_and_close(std::chrono::milliseconds timeout, drop_reason reason,
                               std::function<void(std::uint64_t)> done) {
  {
    std::lock_guard lock(mutex_);
    if (life_ == life::open) {
      enter_life_locked(life::draining);
      ending_ = reason;
    }
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
  bool ended = false;
  {
    std::lock_guard lock(mutex_);
    ended = life_ == life::done;
  }
  if (ended) {
    if (done) done(0);
    return;
  }
  if (done) close_.done.push_back(std::move(done));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (!close_.armed || deadline < close_.deadline) {
    close_.armed = true;
    close_.deadline = deadline;
    drain_timer_.expires_at(deadline);
    drain_timer_.async_wait([self = shared_from_this()](std::error_code ec) {
      // Cancelled: re-armed for an earlier deadline, or already finished.
      if (!ec) self->finish_drain();
    });
  }
  // No new table routes to it: what it holds must not keep any supplier waiting.
  {
    std::lock_guard lock(mutex_);
    paused_.release_locked();
  }
  paused_.resume_released();
  // A member a reload removed from its group: what passes by the older table gave it since the
  // reload goes to the other members too (no pass routes to it any more).
  if (reason == drop_reason::removed) hand_over_held(handover_cause::removed);
  check_drain();
}

// Called whenever the drain may have progressed: finishes once the queue is empty and no
// write is out, or, after the deadline, once the write that was out has come back.
void consumer::check_drain() {
  if (!close_.armed) return;
  bool idle = false;
  bool empty = false;
  bool finishing = false;
  {
    std::lock_guard lock(mutex_);
    if (life_ == life::done) return;
    idle = writer_ == writer::idle;
    // An `ack` consumer's frames are its own once acknowledged.
    empty = queue_.empty() && unacked_.empty();
    finishing = life_ == life::closed;
  }
  if (finishing) {
    if (idle) complete_close();
  } else if (idle && empty) {
    finish_drain();
  }
}

void consumer::finish_drain() {
  {
    std::lock_guard lock(mutex_);
    if (life_ >= life::closed) return;
    enter_life_locked(life::closed);
  }
  drain_timer_.cancel();
  link_.shut();
  check_drain();
}

void consumer::complete_close() {
  frame_counts left;
  drop_reason why = drop_reason::shutdown;  // ending_, read under the lock
  {
    std::lock_guard lock(mutex_);
    enter_life_locked(life::done);
    why = ending_;
    left = queue_.clear(reject_for(why));
    publish_depth_locked();
    paused_.release_locked();
  }
  if (opts_.budget) opts_.budget->give_back(left.bytes);
  // Held, never acknowledged: counted with what was still queued.
  left.frames += unacked_.size();
  frames_abandoned(unacked_.all(), reject_for(why));
  unacked_.pop_front(unacked_.size());
  publish_unacked();
  if (left.frames) {
    stats_.dropped[static_cast<std::size_t>(why)].fetch_add(left.frames, std::memory_order_relaxed);
  }
  paused_.resume_released();
  GW_LOG(info) << "consumer " << name_ << " closed; " << left.frames << " frames undelivered ("
               << to_string(why) << ")";
  auto done = std::move(close_.done);
  close_.done.clear();
  for (auto& d : done)
    d(left.frames);
}

// The table in consumer.hpp.
bool consumer::may_enter(life from, life to) noexcept {
  switch (from) {
    case life::open:
      return to == life::draining;
    case life::draining:
      return to == life::closed;
    case life::closed:
      return to == life::done;
    case life::done:
      return false;
  }
  return false;
}

// Under mutex_, the one place its end moves: anything the table does not hold is a bug.
void consumer::enter_life_locked(life next) noexcept {
  assert(may_enter(life_, next));
  life_ = next;
}

}  // namespace gatewayd::consumers
