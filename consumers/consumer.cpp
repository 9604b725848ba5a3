// The consumer's start, its hot path (put), its flow state, what its link tells it and its reload.
// The rest of the active object, by job: consumer_writer.cpp (the writer role, the drain's
// batches, and what became of them), consumer_pause.cpp (when suppliers pause and go on),
// consumer_handover.cpp (its side of group_membership), consumer_close.cpp (its end, with
// consumer_closing). Its acks are a part of their own (consumer_acks).
#include "consumers/consumer.hpp"

#include <cassert>

#include "runtime/log.hpp"
#include "runtime/log_limit.hpp"

namespace gatewayd::consumers {

consumer::consumer(const runtime::executor& ex, consumer_spec spec, options opts)
    : name_(std::move(spec.name)),
      member_(std::move(spec.member)),
      opts_(opts),
      strand_(runtime::make_strand(ex)),
      queue_(spec.queue_capacity),
      limits_{spec.queue_capacity, spec.queue_bytes, spec.overflow},
      endpoint_(std::move(spec.address)),
      tls_(std::move(spec.tls)),
      capacity_view_(spec.queue_capacity),
      policy_view_(spec.overflow),
      link_(strand_, name_, stats_, backoff(opts.reconnect_initial, opts.reconnect_max),
            opts.limits, *this, spec.ack),
      acks_(spec.ack, spec.max_unacked_bytes, stats_),
      grace_timer_(strand_) {
  // Every CONFIRM frame it lets go of is counted where it goes (what it owes is its own).
  queue_.count_settled_in(&stats_.confirms_settled);
  drain_.count_settled_in(&stats_.confirms_settled);
}

consumer::~consumer() {
  // Only a destroyed io_context (handlers dropped unrun) gets here with frames held; the
  // drain's batch gives its own back.
  const frame_counts left = queue_.clear(std::nullopt);
  if (opts_.budget) opts_.budget->give_back(left.bytes);
  acks_.abandon_all(std::nullopt);
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
    self->link_.start(at, std::move(tls));
  });
}

// ---------------------------------------------------------------------------------------------
// put: the hot path

consumer::put_result consumer::put(std::span<const frame_slice> frames,
                                   const std::shared_ptr<flow_control_listener>& listener,
                                   bool drain_here) {
  put_result result;
  if (frames.empty()) return result;
  // Before the lock: its last run of references goes after the unlock, counted as settled here.
  protocol::release_batch refused(&stats_.confirms_settled);
  admission a;
  bool start_drain = false;
  bool stray = false;    // a group member that is down was given frames (chosen as it went)
  bool spooled = false;  // they went to its spool
  bool nudge = false;    // and its strand has work for it
  bool resume = false;   // and suppliers it paused may go on
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
    if (closing_.now() >= life::closed) {
      // Only a session that routed by a table older than the one that removed this consumer, or
      // one still reading at a stop, gets here, after its drain ended: counted as its end says
      // (and still shown in /metrics); a stop leaves them unsettled.
      const drop_reason ending = closing_.ending();
      for (const auto& f : frames)
        refused.rejected(f, reject_for(ending));
      a.drops[static_cast<std::size_t>(ending)] = frames.size();
      take_confirms_locked(confirms_in(frames));
    } else if (spool_.on() && spools_locked()) {
      // Off the plain path: a consumer with a spool that holds frames, or needs it now.
      resume = spool_put_locked(frames, result, listener);
      spooled = true;
      // The strand has work only if memory holds frames of one that is away (they go to the
      // disk too), or the writer idles with a short queue (a read is due).
      nudge =
          !writable(flow_) || flow_ == flow::congested ? !queue_.empty() : writer_ == writer::idle;
    } else {
      // A consumer whose socket refuses bytes may hold its frames for long: sparse ones are
      // packed from the moment it refuses, not once it counts as slow, so that its grace is
      // bounded by its limits rather than by the read chunks its frames pin.
      const bool policy = policy_applies(flow_);
      a = admit(queue_, frames, limits_, opts_.budget, policy,
                policy || flow_ == flow::refusing ? &packer_ : nullptr, refused,
                confirm_room_locked());
      take_confirms_locked(a.confirms);  // before `refused` settles them, the pause mark asks
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
      stray = membership_.grouped() && !writable(flow_);
    }
  }
  if (spooled) {
    if (resume) spool_may_resume();
    if (nudge) {
      asio::post(strand_, [self = shared_from_this()] {
        self->spill_if_away();
        self->read_spool_if_due();
      });
    }
    return result;
  }
  result.queued = a.queued;
  // Only while another member is up to take them: with every member down it holds them.
  if (stray) membership_.hand_over_if_other_up();
  carry_out_policy(a, slow_conn);
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

std::uint64_t consumer::hold_to_limits_locked(admission& a, protocol::release_batch& released) {
  // A spooled consumer drops nothing while its spool has room: what it holds goes to the disk
  // instead (spill_if_away).
  if (spool_.on()) return 0;
  a = trim(queue_, limits_, opts_.budget, released);
  if (limits_.policy != overflow_policy::backpressure) queue_.fit_to_hint();
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

void consumer::carry_out_policy(const admission& a, std::uint64_t slow_conn) {
  for (std::size_t i = 0; i < drop_reason_count; ++i) {
    if (a.drops[i]) stats_.dropped[i].fetch_add(a.drops[i], std::memory_order_relaxed);
  }
  if (const auto refused = a.drops[static_cast<std::size_t>(drop_reason::confirms_owed)]) {
    GW_LOG_LIMITED(warning, "consumers owing their confirm share")
        << "consumer " << name_ << " owes its share of max_confirm_ledger_bytes ("
        << confirm_share() << " CONFIRM frames): " << refused
        << " more rejected to their suppliers (confirms_owed)";
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

// ---------------------------------------------------------------------------------------------
// The link

void consumer::on_link_up(std::uint64_t conn) {
  bool start = false;
  acks_.connection_up();
  {
    std::lock_guard lock(mutex_);
    conn_ = conn;
    // A write of the previous connection still on its way back (aborted) resumes the drain
    // itself when it returns. What waited meanwhile (frames not acknowledged on the last
    // connection too) keeps the consumer congested until it is written out.
    const bool waiting = !queue_.empty() || !acks_.empty();
    if (writer_ == writer::idle && waiting) {
      enter_writer_locked(writer::writing);
      start = true;
    }
    enter_locked(waiting ? flow::congested : flow::keeping_up);
  }
  drain_.on_link_up(start);
  if (!start) check_drain();
  membership_.came_up();
  read_spool_if_due();
}

void consumer::on_link_down() {
  protocol::release_batch released(&stats_.confirms_settled);
  admission trimmed;
  std::vector<std::weak_ptr<flow_control_listener>> to_tell;
  {
    std::lock_guard lock(mutex_);
    enter_locked(flow::disconnected);
    // A writer waiting for acks has no write out: the role goes, the next connection takes it.
    if (writer_ == writer::parked) enter_writer_locked(writer::idle);
    // Its policy applies to what it holds from now on (the link is down already: a disconnect
    // only discards). Not once its drain has ended: what is left then is counted as the
    // close's reason.
    if (closing_.now() < life::closed) hold_to_limits_locked(trimmed, released);
    publish_depth_locked();
    if (limits_.policy == overflow_policy::backpressure && closing_.now() == life::open)
      paused_.copy_paused_locked(to_tell);
  }
  carry_out_policy(trimmed, 0);
  tell_stalled(to_tell);
  membership_.hand_over_held(handover_cause::failed);
  spill_if_away();
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
    acks_.set_limit(spec.max_unacked_bytes);
    if (spool_.on() && spec.spool_max_bytes) spool_.files()->set_max_bytes(spec.spool_max_bytes);
    endpoint_ = spec.address;
    tls_ = spec.tls;
    // From here on frames wait for the new endpoint; a batch already out may still go to the
    // old one.
    if (moved && writable(flow_))
      enter_locked(flow_ == flow::congested ? flow::disconnected : flow::moving);
  }
  if (spool_.on() != (spec.spool_max_bytes != 0)) {
    GW_LOG(warning) << "consumer " << name_ << ": spool_max_bytes turned "
                    << (spec.spool_max_bytes ? "on" : "off")
                    << " for a running consumer: that takes a restart; it keeps "
                    << (spool_.on() ? "its spool" : "running without one") << " until then";
  }
  // A larger capacity or a policy other than backpressure may release paused suppliers.
  // A larger max_unacked_bytes may let a writer waiting for acks go on.
  asio::post(strand_, [self = shared_from_this(), moved, at = spec.address, tls = spec.tls] {
    if (moved) self->link_.move_to(at, tls);
    self->resume_if_below_low_water();
    self->resume_parked_writer();
  });
}

}  // namespace gatewayd::consumers
