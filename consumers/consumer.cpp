#include "consumers/consumer.hpp"

#include <cassert>

namespace gatewayd::consumers {

consumer::consumer(const runtime::executor& ex, consumer_spec spec, options opts)
    : name_(std::move(spec.name)),
      member_(std::move(spec.member)),
      acks_(spec.ack),
      opts_(opts),
      strand_(runtime::make_strand(ex)),
      queue_(spec.queue_capacity),
      limits_{spec.queue_capacity, spec.queue_bytes, spec.overflow},
      endpoint_(std::move(spec.address)),
      tls_(std::move(spec.tls)),
      max_unacked_bytes_(spec.max_unacked_bytes),
      capacity_view_(spec.queue_capacity),
      policy_view_(spec.overflow),
      link_(strand_, name_, stats_, backoff(opts.reconnect_initial, opts.reconnect_max),
            opts.limits, *this, spec.ack),
      grace_timer_(strand_),
      drain_timer_(strand_) {}

consumer::~consumer() {
  // Only a destroyed io_context (handlers dropped unrun) gets here with frames held; the
  // drain's batch gives its own back.
  const frame_counts left = queue_.clear(std::nullopt);
  if (opts_.budget) opts_.budget->release(left.bytes);
  frames_abandoned(unacked_.all(), std::nullopt);
  unacked_.pop_front(unacked_.size());
}

std::uint32_t consumer::capacity() const noexcept {
  return capacity_view_.load(std::memory_order_relaxed);
}

overflow_policy consumer::policy() const noexcept {
  return policy_view_.load(std::memory_order_relaxed);
}

void consumer::start() {
  asio::post(strand_, [self = shared_from_this()] {
    net::endpoint at;
    std::optional<consumer_tls> tls;
    {
      std::lock_guard lock(self->mutex_);
      at = self->endpoint_;
      tls = self->tls_;
    }
    self->link_.start(at, std::move(tls), self);
  });
}

// ---------------------------------------------------------------------------------------------
// put: the hot path

consumer::put_result consumer::put(std::span<const frame_slice> frames,
                                   const std::shared_ptr<flow_control_listener>& listener,
                                   bool drain_here) {
  put_result result;
  if (frames.empty()) return result;
  // Declared before the lock so that the last run of refused references is released after
  // the unlock.
  protocol::release_batch refused;
  admission a;
  bool start_drain = false;
  bool stray = false;  // a group member that is down was given frames (chosen as it went)
  std::uint64_t slow_conn = 0;
  {
    // Contention is timed only when it happens: the uncontended path reads no clock.
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) {
      const auto t0 = std::chrono::steady_clock::now();
      lock.lock();
      stats_.blocked_lock_ns.fetch_add(
          static_cast<std::uint64_t>((std::chrono::steady_clock::now() - t0).count()),
          std::memory_order_relaxed);
    }
    if (life_ >= life::closed) {
      // Only a session that routed by a table older than the one that removed this consumer, or
      // one still reading at a stop, gets here, after its drain ended: counted as its end says
      // (and still shown in /metrics); a stop leaves them unsettled.
      for (const auto& f : frames)
        refused.rejected(f, reject_for(ending_));
      a.drops[static_cast<std::size_t>(ending_)] = frames.size();
    } else {
      // A consumer whose socket refuses bytes may hold its frames for long: sparse ones are
      // packed from the moment it refuses, not once it counts as slow, so that its grace is
      // bounded by its limits rather than by the read chunks its frames pin.
      const bool policy = policy_applies(flow_);
      a = admit(queue_, frames, limits_, opts_.budget, policy,
                policy || flow_ == flow::refusing ? &packer_ : nullptr, refused);
      if (a.slow) slow_conn = give_up_link_locked();
      // Past its pause mark (pause_mark_locked() says which and why) the suppliers pause.
      const pause_mark mark = pause_mark_locked(a.over_budget);
      if (mark != pause_mark::none) {
        result.pause_supplier = true;
        result.paused_by_consumer = mark == pause_mark::consumer_full && policy;
        paused_.add(listener);
      }
      if (writable(flow_) && !queue_.empty() && writer_ == writer::idle) {
        enter_writer_locked(writer::writing);
        start_drain = true;
      }
      publish_depth_locked();
      stray = grouped_ && !writable(flow_);
    }
  }
  result.queued = a.queued;
  // Only while another member is up to take them: with every member down it holds them.
  if (stray) hand_over_if_other_up();
  settle_policy(a, slow_conn);
  result.wrote = start_drain && drain_here;
  if (start_drain) drain_.start(drain_here);
  return result;
}

// ---------------------------------------------------------------------------------------------
// The flow state

void consumer::enter_locked(flow to) noexcept {
  const flow from = flow_;
  if (from == to) return;
  // The table in consumer.hpp; anything else is a bug.
  [[maybe_unused]] const bool allowed =
      to == flow::disconnected ||
      (from == flow::disconnected && (to == flow::keeping_up || to == flow::congested)) ||
      (from == flow::keeping_up && (to == flow::refusing || to == flow::moving)) ||
      (from == flow::refusing &&
       (to == flow::keeping_up || to == flow::congested || to == flow::moving)) ||
      (from == flow::congested && to == flow::keeping_up);
  assert(allowed);
  flow_ = to;
  // Caught up with everything on a live connection: what was packed for the wait is let go.
  if (to == flow::keeping_up && (from == flow::refusing || from == flow::congested))
    packer_.let_go();
  stats_.congested.store(policy_applies(to), std::memory_order_relaxed);
  publish_pause_mark_locked();
}

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
    if (writer_ != writer::parked || unacked_.bytes() >= max_unacked_bytes_) return false;
    enter_writer_locked(writer::writing);
  }
  drain_.start(true);
  return true;
}

// ---------------------------------------------------------------------------------------------
// For the drain

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
  if (!more) check_drain();
  return more;
}

bool consumer::take_batch_locked(write_batch& batch, std::uint64_t& conn, bool& left_refusing,
                                 bool& parked) {
  if (writable(flow_) && acks_) redeliver_locked();
  if (writable(flow_) && !queue_.empty()) {
    if (acks_ && unacked_.bytes() >= max_unacked_bytes_) {
      enter_writer_locked(writer::parked);
      parked = true;
      return false;
    }
    // Never more than the room left under max_unacked_bytes (but one frame always goes).
    batch.fill(queue_, acks_ ? max_unacked_bytes_ - unacked_.bytes() : write_batch::max_bytes);
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
  protocol::release_batch released;  // released after the unlock
  admission trimmed;
  std::uint64_t slow_conn = 0;
  std::vector<std::weak_ptr<flow_control_listener>> held;
  {
    std::lock_guard lock(mutex_);
    // Caught up, or gone, meanwhile.
    if (flow_ != flow::refusing) return;
    enter_locked(flow::congested);
    // What queued while it kept up meets its policy now, not only what comes next.
    slow_conn = hold_to_limits_locked(trimmed, released);
    // It will hold what it has for long: frames pinning mostly unused read chunks are copied
    // out of them (what follows is copied as it comes, in put()).
    queue_.compact(packer_);
    drain_.compact(packer_);
    publish_depth_locked();
    // Suppliers paused while the gateway waited for this consumer are let go: it is the slow
    // one, and its overflow policy deals with it from here on (backpressure keeps its own).
    if (below_low_water_locked()) {
      paused_.release_locked();
    } else if (limits_.policy == overflow_policy::backpressure) {
      paused_.copy_waiting_locked(held);
    }
  }
  settle_policy(trimmed, slow_conn);
  paused_.resume_released();
  tell_held(held);
  hand_over_held(handover_cause::slow);
}

void consumer::batch_failed(write_batch& batch) {
  frame_counts discarded;
  protocol::release_batch released;
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
  settle_policy(trimmed, slow_conn);
  if (discarded.frames) {
    if (opts_.budget) opts_.budget->release(discarded.bytes);
    stats_.dropped[static_cast<std::size_t>(drop_reason::slow_consumer)].fetch_add(
        discarded.frames, std::memory_order_relaxed);
  }
  // A group member's batch back from a connection that went down follows what it handed over.
  hand_over_held(handover_cause::failed);
}

std::uint64_t consumer::hold_to_limits_locked(admission& a, protocol::release_batch& released) {
  a = trim(queue_, limits_, opts_.budget, released);
  return a.slow ? give_up_link_locked() : 0;
}

std::uint64_t consumer::give_up_link_locked() noexcept {
  if (!writable(flow_)) return 0;
  // No write may start on the doomed connection from here on; the strand drops it, and a
  // batch being written is discarded when it comes back.
  enter_locked(flow::disconnected);
  if (writer_ == writer::writing) enter_writer_locked(writer::discarding);
  return conn_;
}

void consumer::settle_policy(const admission& a, std::uint64_t slow_conn) {
  for (std::size_t i = 0; i < drop_reason_count; ++i) {
    if (a.drops[i]) stats_.dropped[i].fetch_add(a.drops[i], std::memory_order_relaxed);
  }
  if (slow_conn) {
    asio::post(strand_, [self = shared_from_this(), slow_conn, n = a.discarded] {
      self->link_.drop_slow(slow_conn, n);
    });
  }
}

void consumer::publish_depth_locked() noexcept {
  stats_.queued_frames.store(queue_.size(), std::memory_order_relaxed);
  stats_.queued_bytes.store(queue_.bytes(), std::memory_order_relaxed);
  publish_pause_mark_locked();
}

// Only a group's choice reads it: a consumer of its own pays nothing for it.
void consumer::publish_pause_mark_locked() noexcept {
  if (!grouped_) return;
  stats_.at_pause_mark.store(pause_mark_locked(false) != pause_mark::none,
                             std::memory_order_relaxed);
}

// Backpressure pauses at the queue's limits; any consumer that keeps up pauses at the gateway's
// own high-water mark, where the gateway, not the consumer, is behind. One whose socket refuses
// bytes is in its grace (slow_after): its queue may fill to its own limits first, so that a
// consumer that stalls does not stall the others fed by the same suppliers (they would wait out
// its grace); only a full queue (or the gateway-wide budget) pauses them, as nothing may be
// dropped before the grace is over. A draining consumer takes what was routed to it but pauses
// nobody: new frames go by a table that no longer names it.
consumer::pause_mark consumer::pause_mark_locked(bool over_budget) const noexcept {
  if (life_ != life::open) return pause_mark::none;
  const bool full = at_limit(queue_, limits_) || over_budget;
  if (limits_.policy == overflow_policy::backpressure && full) return pause_mark::consumer_full;
  if (policy_applies(flow_)) return pause_mark::none;
  const bool behind = flow_ == flow::refusing ? full : above_high_water(queue_, limits_);
  return behind ? pause_mark::gateway_behind : pause_mark::none;
}

// ---------------------------------------------------------------------------------------------
// The link

void consumer::on_link_up(std::uint64_t conn) {
  bool start = false;
  unacked_.connection_up();
  {
    std::lock_guard lock(mutex_);
    conn_ = conn;
    // A write of the previous connection still on its way back (aborted) resumes the drain
    // itself when it returns. What waited meanwhile (frames not acknowledged on the last
    // connection too) keeps the consumer congested until it is written out.
    const bool waiting = !queue_.empty() || !unacked_.empty();
    if (writer_ == writer::idle && waiting) {
      enter_writer_locked(writer::writing);
      start = true;
    }
    enter_locked(waiting ? flow::congested : flow::keeping_up);
  }
  drain_.on_link_up(start);
  if (!start) check_drain();
  member_came_up();
}

void consumer::on_link_down() {
  protocol::release_batch released;
  admission trimmed;
  std::vector<std::weak_ptr<flow_control_listener>> held;
  {
    std::lock_guard lock(mutex_);
    enter_locked(flow::disconnected);
    // A writer waiting for acks has no write out: the role goes, the next connection takes it.
    if (writer_ == writer::parked) enter_writer_locked(writer::idle);
    // Its policy applies to what it holds from now on (the link is down already: a disconnect
    // only discards). Not once its drain has ended: what is left then is counted as the
    // close's reason.
    if (life_ < life::closed) hold_to_limits_locked(trimmed, released);
    publish_depth_locked();
    if (limits_.policy == overflow_policy::backpressure && life_ == life::open)
      paused_.copy_waiting_locked(held);
  }
  settle_policy(trimmed, 0);
  tell_held(held);
  hand_over_held(handover_cause::failed);
}

void consumer::reconfigure(const consumer_spec& spec) {
  bool moved = false;
  {
    std::lock_guard lock(mutex_);
    limits_ = {spec.queue_capacity, spec.queue_bytes, spec.overflow};
    queue_.set_capacity_hint(spec.queue_capacity);
    capacity_view_.store(spec.queue_capacity, std::memory_order_relaxed);
    policy_view_.store(spec.overflow, std::memory_order_relaxed);
    // New TLS settings redial like a new endpoint: the frame cut mid-write goes whole to the
    // next connection, which handshakes with the new context.
    moved = !(spec.address == endpoint_) || !(spec.tls == tls_);
    max_unacked_bytes_ = spec.max_unacked_bytes;
    endpoint_ = spec.address;
    tls_ = spec.tls;
    // From here on frames wait for the new endpoint; a batch already out may still go to the
    // old one.
    if (moved && writable(flow_))
      enter_locked(flow_ == flow::congested ? flow::disconnected : flow::moving);
  }
  // A larger capacity or a policy other than backpressure may release paused suppliers.
  // A larger max_unacked_bytes may let a writer waiting for acks go on.
  asio::post(strand_, [self = shared_from_this(), moved, at = spec.address, tls = spec.tls] {
    if (moved) self->link_.move_to(at, tls);
    self->resume_if_below_low_water();
    self->resume_parked_writer();
  });
}

// ---------------------------------------------------------------------------------------------
// Backpressure

bool consumer::below_low_water_locked() const noexcept {
  // Suppliers paused on this consumer are released when it stops taking frames (closing);
  // when the gateway had caught up with it, or it stopped keeping up (then its policy
  // applies); and, under backpressure, once the queue is down to half its limits.
  if (life_ != life::open) return true;
  // A consumer whose socket refuses bytes holds its suppliers only while its queue is full
  // (put()); they go on once it is down to half its limits.
  const bool caught_up =
      policy_applies(flow_) || (flow_ == flow::refusing ? below_half_limits(queue_, limits_)
                                                        : below_low_water(queue_, limits_));
  if (limits_.policy != overflow_policy::backpressure) return caught_up;
  return caught_up && below_half_limits(queue_, limits_);
}

void consumer::tell_held(const std::vector<std::weak_ptr<flow_control_listener>>& held) {
  for (const auto& w : held) {
    if (auto l = w.lock()) l->held_by_stalled_consumer();
  }
}

void consumer::resume_if_below_low_water() {
  {
    std::lock_guard lock(mutex_);
    if (below_low_water_locked()) paused_.release_locked();
  }
  paused_.resume_released();
}

}  // namespace gatewayd::consumers
