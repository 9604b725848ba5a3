// How a consumer ends: drain what it holds for a bounded time, then close and report. Its end's
// state and deadline are the closing part's (consumer_closing.hpp); this is what the end does.
#include "consumers/consumer.hpp"
#include "runtime/log.hpp"

namespace gatewayd::consumers {

void consumer::drain_and_close(std::chrono::milliseconds timeout, drop_reason reason,
                               std::function<void(std::uint64_t)> done) {
  {
    std::lock_guard lock(mutex_);
    closing_.begin(reason);
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
    ended = closing_.now() == life::done;
  }
  if (ended) {
    if (done) done(0);
    return;
  }
  closing_.arm(timeout, std::move(done));
  // No new table routes to it: what it holds must not keep any supplier waiting.
  {
    std::lock_guard lock(mutex_);
    paused_.release_locked();
  }
  paused_.resume_released();
  // A member a reload removed from its group: what passes by the older table gave it since the
  // reload goes to the other members too (no pass routes to it any more).
  if (reason == drop_reason::removed) membership_.hand_over_held(handover_cause::removed);
  check_drain();
}

// Called whenever the drain may have progressed: finishes once the queue is empty and no
// write is out, or, after the deadline, once the write that was out has come back.
void consumer::check_drain() {
  if (!closing_.armed()) return;
  // A spooled consumer's drain is to its disk.
  if (spool_.on() && spool_at_end()) return;
  bool idle = false;
  bool empty = false;
  bool finishing = false;
  {
    std::lock_guard lock(mutex_);
    if (closing_.now() == life::done) return;
    idle = writer_ == writer::idle;
    // An `ack` consumer's frames are its own once acknowledged.
    empty = queue_.empty() && acks_.empty();
    finishing = closing_.now() == life::closed;
  }
  if (finishing) {
    if (idle) complete_close();
  } else if (idle && empty) {
    end_drain();
  }
}

// The drain ended: emptied, or out of time.
void consumer::end_drain() {
  {
    std::lock_guard lock(mutex_);
    if (closing_.now() >= life::closed) return;
    closing_.enter(life::closed);
  }
  closing_.cancel_deadline();
  link_.shut();
  check_drain();
}

void consumer::complete_close() {
  frame_counts left;
  drop_reason why = drop_reason::shutdown;  // the ending, read under the lock
  {
    std::lock_guard lock(mutex_);
    closing_.enter(life::done);
    why = closing_.ending();
    // A spooled consumer loses nothing at its end: what is left goes to its spool (synced by
    // the spool thread at the latest when it stops).
    if (spool_.on()) spill_locked(writer_ == writer::idle);
    left = queue_.clear(reject_for(why));
    publish_depth_locked();
    paused_.release_locked();
  }
  if (opts_.budget) opts_.budget->give_back(left.bytes);
  grace_timer_.cancel();  // a refusing consumer's grace means nothing any more
  // Held, never acknowledged: counted with what was still queued.
  left.frames += acks_.abandon_all(reject_for(why));
  if (left.frames) {
    stats_.dropped[static_cast<std::size_t>(why)].fetch_add(left.frames, std::memory_order_relaxed);
  }
  paused_.resume_released();
  GW_LOG(info) << "consumer " << name_ << " closed; " << left.frames << " frames undelivered ("
               << to_string(why) << ")";
  if (const spool* s = spool_.files().get()) {
    GW_LOG(info) << "consumer " << name_ << ": spool " << s->dir().string() << " kept, "
                 << s->stats().frames.load(std::memory_order_relaxed) << " frames ("
                 << s->stats().bytes.load(std::memory_order_relaxed) << " bytes)";
  }
  closing_.report(left.frames);
}

}  // namespace gatewayd::consumers
