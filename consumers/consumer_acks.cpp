// Where a consumer's written frames go: settled at once, or, for an `ack = true` consumer,
// held until its acks cover them and redelivered first on its next connection.
#include "consumers/consumer.hpp"

namespace gatewayd::consumers {

void consumer::batch_sent(write_batch& batch, std::size_t n) {
  frame_counts sent;
  if (!acks_) {
    sent = batch.written(n);  // delivered in the same walk that finds them
  } else {
    const auto written = batch.take_written(n);
    sent = written.counts();
    if (sent.frames) unacked_.push_back(written.slices);
  }
  if (!sent.frames) return;
  // Held frames leave the queue budget: max_unacked_bytes bounds them.
  if (opts_.budget) opts_.budget->give_back(sent.bytes);
  stats_.sent_frames.fetch_add(sent.frames, std::memory_order_relaxed);
  stats_.sent_bytes.fetch_add(sent.bytes, std::memory_order_relaxed);
  if (acks_) publish_unacked();
}

ack_error consumer::on_ack(std::uint64_t, std::uint64_t n) {
  // The link passes on only acks of the connection up, and on_link_up() restarted the count.
  std::size_t covered = 0;
  if (const auto e = unacked_.acknowledge(n, covered); e != ack_error::none) return e;
  if (covered) {
    frames_delivered(unacked_.front(covered));
    unacked_.pop_front(covered);
    publish_unacked();
    // Acks settle what it owes: suppliers a backpressure consumer paused for its share go on.
    if (policy() == overflow_policy::backpressure) resume_if_below_low_water();
  }
  if (!resume_parked_writer()) check_drain();
  return ack_error::none;
}

void consumer::redeliver_locked() {
  if (!unacked_.redeliver_on(conn_)) return;
  const auto held = unacked_.all();
  queue_.push_front_batch(held);  // the references move with the frames
  const std::uint64_t bytes = unacked_.pop_front(held.size());
  // Queued again: they count against the gateway-wide budget as any queued frame.
  if (opts_.budget) opts_.budget->take(bytes);
  stats_.redelivered_frames.fetch_add(held.size(), std::memory_order_relaxed);
  publish_unacked();
  publish_depth_locked();
}

void consumer::frames_delivered(std::span<const frame_slice> frames) noexcept {
  protocol::deliver_slices(frames, &stats_.confirms_settled);
}

void consumer::frames_abandoned(std::span<const frame_slice> frames,
                                protocol::give_up why) noexcept {
  protocol::reject_slices(frames, why, &stats_.confirms_settled);
}

void consumer::publish_unacked() noexcept {
  stats_.unacked_frames.store(unacked_.size(), std::memory_order_relaxed);
  stats_.unacked_bytes.store(unacked_.bytes(), std::memory_order_relaxed);
}

}  // namespace gatewayd::consumers
