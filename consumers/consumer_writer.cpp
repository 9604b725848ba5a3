// The consumer's writer role (one strand writer at a time, its transitions asserted in one
// place) and what its drain asks of it: the next batch, and how each batch ended.
#include "consumers/consumer.hpp"

#include <cassert>

namespace gatewayd::consumers {

void consumer::enter_writer_locked(writer to) noexcept {
  const writer from = writer_;
  if (from == to) return;
  // The table in consumer.hpp; anything else is a bug.
  [[maybe_unused]] const bool allowed =
      (from == writer::idle && to == writer::writing) ||
      (from == writer::writing &&
       (to == writer::idle || to == writer::parked || to == writer::discarding)) ||
      (from == writer::parked && (to == writer::writing || to == writer::idle)) ||
      (from == writer::discarding && (to == writer::writing || to == writer::idle));
  assert(allowed);
  writer_ = to;
}

bool consumer::resume_parked_writer() {
  {
    std::lock_guard lock(mutex_);
    if (writer_ != writer::parked || acks_.full()) return false;
    enter_writer_locked(writer::writing);
  }
  drain_.start(true);
  return true;
}

// ---------------------------------------------------------------------------------------------
// batch_source: what the drain asks of it

bool consumer::take_batch(write_batch& batch, std::uint64_t& conn) {
  bool more = false;
  bool left_refusing = false;
  bool parked = false;
  {
    std::lock_guard lock(mutex_);
    more = take_batch_locked(batch, conn, left_refusing, parked);
    if (below_low_water_locked()) paused_.release_locked();
  }
  if (left_refusing) grace_timer_.cancel();
  // Holding max_unacked_bytes is not keeping up, as a full socket is.
  if (parked) batch_refused();
  // Nothing to send: a TLS connection gives its staging buffer back while it idles.
  if (!more && link_.secure_stream()) link_.secure_stream()->release_buffers();
  paused_.resume_released();
  if (spool_.on()) {
    // A batch taken may leave the queue short (a read is due); none taken, the link may be down.
    if (!more) spill_if_away();
    read_spool_if_due();
  }
  if (!more) check_drain();
  return more;
}

bool consumer::take_batch_locked(write_batch& batch, std::uint64_t& conn, bool& left_refusing,
                                 bool& parked) {
  if (writable(flow_) && acks_.acks()) redeliver_locked();
  if (writable(flow_) && !queue_.empty()) {
    if (acks_.full()) {
      enter_writer_locked(writer::parked);
      parked = true;
      return false;
    }
    // Never more than the room left under max_unacked_bytes (but one frame always goes).
    batch.fill(queue_, acks_.room());
    conn = conn_;
    publish_depth_locked();
    return true;
  }
  // Caught up with everything on a live connection: from here on the consumer keeps up again.
  if (writable(flow_)) {
    left_refusing = flow_ == flow::refusing;
    enter_locked(flow::keeping_up);
  }
  enter_writer_locked(writer::idle);
  return false;
}

void consumer::batch_refused() {
  {
    std::lock_guard lock(mutex_);
    // Already refusing (its grace runs) or behind (its policy applies), or no longer writing
    // to this connection: nothing changes.
    if (flow_ != flow::keeping_up) return;
    enter_locked(flow::refusing);
    // Suppliers paused at the high-water mark while the socket still took bytes are let go: from
    // here on only a full queue holds them (put()).
    if (below_low_water_locked()) paused_.release_locked();
  }
  paused_.resume_released();
  grace_timer_.expires_after(opts_.slow_after);
  grace_timer_.async_wait([self = shared_from_this()](std::error_code ec) {
    if (!ec) self->fell_behind();
  });
}

void consumer::fell_behind() {
  protocol::release_batch released(&stats_.confirms_settled);  // released after the unlock
  admission trimmed;
  std::uint64_t slow_conn = 0;
  std::vector<std::weak_ptr<flow_control_listener>> to_tell;
  {
    std::lock_guard lock(mutex_);
    // Caught up, or gone, meanwhile.
    if (flow_ != flow::refusing) return;
    enter_locked(flow::congested);
    // What queued while it kept up meets its policy now, not only what comes next.
    slow_conn = hold_to_limits_locked(trimmed, released);
    // It will hold what it has for long: frames pinning mostly unused read chunks are copied
    // out of them (what follows is copied as it comes, in put()). Not a spooled consumer's:
    // they go to its disk (below).
    if (!spool_.on()) {
      queue_.compact(packer_);
      drain_.compact(packer_);
    }
    publish_depth_locked();
    // Suppliers paused while the gateway waited for this consumer are let go: it is the slow
    // one, and its overflow policy deals with it from here on (backpressure keeps its own).
    if (below_low_water_locked()) {
      paused_.release_locked();
    } else if (limits_.policy == overflow_policy::backpressure) {
      paused_.copy_paused_locked(to_tell);
    }
  }
  carry_out_policy(trimmed, slow_conn);
  paused_.resume_released();
  tell_stalled(to_tell);
  membership_.hand_over_held(handover_cause::slow);
  spill_if_away();
}

void consumer::batch_failed(write_batch& batch) {
  frame_counts discarded;
  protocol::release_batch released(&stats_.confirms_settled);
  admission trimmed;
  std::uint64_t slow_conn = 0;
  {
    std::lock_guard lock(mutex_);
    if (!batch.empty()) {
      if (writer_ == writer::discarding) {
        discarded = batch.discard(protocol::reject_reason::dropped);
      } else {
        batch.return_to(queue_);  // sent whole on the next connection
        // A congested queue stays within its limits with the batch back in it too.
        if (policy_applies(flow_)) slow_conn = hold_to_limits_locked(trimmed, released);
      }
    }
    if (writer_ == writer::discarding) enter_writer_locked(writer::writing);
    publish_depth_locked();
  }
  carry_out_policy(trimmed, slow_conn);
  if (discarded.frames) {
    if (opts_.budget) opts_.budget->give_back(discarded.bytes);
    stats_.dropped[static_cast<std::size_t>(drop_reason::slow_consumer)].fetch_add(
        discarded.frames, std::memory_order_relaxed);
  }
  // A group member's batch back from a connection that went down follows what it handed over.
  membership_.hand_over_held(handover_cause::failed);
}

// ---------------------------------------------------------------------------------------------
// What became of a batch's frames: written, and, for an `ack` consumer, acknowledged

void consumer::batch_sent(write_batch& batch, std::size_t n) {
  frame_counts sent;
  if (spool_.on() && !acks_.acks()) {
    // Written whole: what came from its spool leaves it.
    const auto written = batch.take_written(n);
    spool_delivered(written.slices);
    protocol::deliver_slices(written.slices, &stats_.confirms_settled);
    sent = written.counts();
  } else {
    sent = acks_.written(batch, n);
  }
  if (!sent.frames) return;
  // Held frames leave the queue budget: max_unacked_bytes bounds them.
  if (opts_.budget) opts_.budget->give_back(sent.bytes);
  stats_.sent_frames.fetch_add(sent.frames, std::memory_order_relaxed);
  stats_.sent_bytes.fetch_add(sent.bytes, std::memory_order_relaxed);
}

ack_error consumer::on_ack(std::uint64_t, std::uint64_t n) {
  std::size_t covered = 0;
  if (const auto e = acks_.acknowledge(n, covered); e != ack_error::none) return e;
  // Acks settle what it owes: suppliers a backpressure consumer paused for its share go on.
  if (covered && policy() == overflow_policy::backpressure) resume_if_below_low_water();
  if (!resume_parked_writer()) check_drain();
  return ack_error::none;
}

void consumer::redeliver_locked() {
  const frame_counts moved = acks_.redeliver_to(queue_, conn_);
  if (!moved.frames) return;
  // Queued again: they count against the gateway-wide budget as any queued frame.
  if (opts_.budget) opts_.budget->take(moved.bytes);
  publish_depth_locked();
}

}  // namespace gatewayd::consumers
