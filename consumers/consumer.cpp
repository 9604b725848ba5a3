#include "consumers/consumer.hpp"

#include <algorithm>

#include "gateway/lf_pool.hpp"
#include "gateway/log.hpp"

namespace gatewayd::consumers {

using gateway::lf_pool;
using suppliers::frame_slice;

namespace {

// One gathered write carries at most this much: enough to amortise the syscall and the strand
// hop over many frames, small enough that a batch stuck on a slow peer holds little outside
// the queue (where the overflow policy cannot reach it).
constexpr std::size_t max_batch_frames = 1024;
constexpr std::uint64_t max_batch_bytes = 1u << 20;

constexpr std::size_t reason_index(drop_reason r) noexcept {
  return static_cast<std::size_t>(r);
}

}  // namespace

struct consumer::admission {
  release_batch& refused;  // references of frames dropped or evicted
  std::array<std::uint64_t, drop_reason_count> drops{};
  std::uint32_t queued = 0;
  std::uint64_t discarded = 0;  // frames the disconnect policy threw away
  bool slow = false;            // the disconnect policy fired
  bool over_budget = false;     // backpressure queued past the global budget
};

consumer::consumer(asio::io_context& ioc, routing::consumer_spec spec, options opts)
    : name_(std::move(spec.name)),
      opts_(opts),
      strand_(asio::make_strand(ioc)),
      socket_(strand_),
      redial_timer_(strand_),
      drain_timer_(strand_),
      queue_(spec.queue_capacity),
      endpoint_(std::move(spec.address)),
      capacity_(spec.queue_capacity),
      byte_cap_(spec.queue_bytes),
      policy_(spec.overflow),
      capacity_view_(spec.queue_capacity),
      policy_view_(spec.overflow),
      backoff_(opts.reconnect_initial, opts.reconnect_max) {}

consumer::~consumer() {
  // Only a destroyed io_context (handlers dropped unrun) gets here with frames in flight.
  release_slices(in_flight_);
  const frame_counts left = queue_.clear();
  if (opts_.budget) opts_.budget->release(left.bytes + (in_flight_.empty() ? 0 : in_flight_bytes_));
}

std::uint32_t consumer::capacity() const noexcept {
  return capacity_view_.load(std::memory_order_relaxed);
}

routing::overflow_policy consumer::policy() const noexcept {
  return policy_view_.load(std::memory_order_relaxed);
}

void consumer::start() {
  asio::post(strand_, [self = shared_from_this()] {
    lf_pool::promote_new_leader();
    if (self->state_ == link_state::idle) self->do_connect();
  });
}

// ---------------------------------------------------------------------------------------------
// put: the hot path

consumer::put_result consumer::put(std::span<const frame_slice> frames,
                                   const std::shared_ptr<flow_control_listener>& listener) {
  put_result result;
  if (frames.empty()) return result;
  std::uint64_t batch_bytes = 0;
  for (const auto& f : frames)
    batch_bytes += f.size;

  // Declared before the lock so that the last run of refused references is released after
  // the unlock.
  release_batch refused;
  admission a{refused};
  bool post_drain = false;
  bool post_close = false;
  bool write_now = false;
  std::uint64_t close_conn = 0;
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
    if (closing_) {
      for (const auto& f : frames)
        refused.add(f.chunk);
      a.drops[reason_index(drop_reason::removed)] = frames.size();
    } else {
      admit_locked(frames, batch_bytes, a);
      if (a.slow && connected_) {
        // No drain may start on the doomed connection from here on; the strand closes it.
        connected_ = false;
        post_close = true;
        close_conn = conn_id_;
      }
      if (policy_ == routing::overflow_policy::backpressure &&
          (queue_.size() >= capacity_ || (byte_cap_ && queue_.bytes() >= byte_cap_) ||
           a.over_budget)) {
        result.pause_supplier = true;
        // Cheap dedupe of the common repeat; resume_collected() removes the rest.
        if (listener && (waiters_.empty() || waiters_.back() != listener)) {
          waiters_.push_back(listener);
        }
      }
      if (opts_.drain == drain_model::mutex) {
        write_now = connected_ && !queue_.empty();
      } else if (connected_ && !writing_ && !queue_.empty()) {
        writing_ = true;
        post_drain = true;
      }
      publish_depth_locked();
    }
  }
  result.queued = a.queued;
  for (std::size_t i = 0; i < drop_reason_count; ++i) {
    if (a.drops[i]) stats_.dropped[i].fetch_add(a.drops[i], std::memory_order_relaxed);
  }
  if (post_close) {
    asio::post(strand_, [self = shared_from_this(), close_conn, n = a.discarded] {
      lf_pool::promote_new_leader();
      self->close_slow(close_conn, n);
    });
  }
  if (post_drain) {
    asio::post(strand_, [self = shared_from_this()] {
      lf_pool::promote_new_leader();
      self->do_drain();
    });
  }
  if (write_now) write_in_caller();
  return result;
}

// The budget is reserved for the whole batch at once; only when that fails (the gateway is
// near max_queued_bytes) does each frame reserve its own bytes, so the shared counter is
// touched once per batch in the normal case. Every queued frame holds its bytes in the budget
// until it is sent or dropped.
void consumer::admit_locked(std::span<const frame_slice> frames, std::uint64_t batch_bytes,
                            admission& a) {
  using routing::overflow_policy;
  queue_budget* const budget = opts_.budget;
  const bool batch_reserved = !budget || budget->try_reserve(batch_bytes);
  std::uint64_t unreserve = 0;

  // Bytes leaving the queue: deferred to one release on the batch path, given back at once on
  // the per-frame path where the next reservation needs them.
  const auto give_back = [&](std::uint64_t bytes) {
    if (!budget) return;
    if (batch_reserved) {
      unreserve += bytes;
    } else {
      budget->release(bytes);
    }
  };
  const auto evict_oldest = [&](drop_reason why) {
    const frame_slice old = queue_.pop_front();
    a.refused.add(old.chunk);
    ++a.drops[reason_index(why)];
    give_back(old.size);
  };
  // `reserved`: the frame's bytes are held in the budget (and must be given back).
  const auto refuse = [&](const frame_slice& f, drop_reason why, bool reserved) {
    a.refused.add(f.chunk);
    ++a.drops[reason_index(why)];
    if (reserved) give_back(f.size);
  };
  const auto reserve_one = [&](const frame_slice& f) { return budget->try_reserve(f.size); };

  for (const auto& f : frames) {
    bool reserved = batch_reserved;
    switch (policy_) {
      case overflow_policy::drop_oldest: {
        while (!queue_.empty() && queue_.size() >= capacity_)
          evict_oldest(drop_reason::queue_full);
        while (!queue_.empty() && byte_cap_ && queue_.bytes() + f.size > byte_cap_) {
          evict_oldest(drop_reason::queue_bytes);
        }
        // Capacity 0, or a frame larger than the whole byte cap: nothing to evict would help.
        if (capacity_ == 0) {
          refuse(f, drop_reason::queue_full, reserved);
          continue;
        }
        if (byte_cap_ && f.size > byte_cap_) {
          refuse(f, drop_reason::queue_bytes, reserved);
          continue;
        }
        if (!reserved) {
          while (!(reserved = reserve_one(f)) && !queue_.empty()) {
            evict_oldest(drop_reason::global_bytes);
          }
          if (!reserved) {
            refuse(f, drop_reason::global_bytes, false);
            continue;
          }
        }
        break;
      }
      case overflow_policy::drop_newest: {
        if (queue_.size() >= capacity_) {
          refuse(f, drop_reason::queue_full, reserved);
          continue;
        }
        if (byte_cap_ && queue_.bytes() + f.size > byte_cap_) {
          refuse(f, drop_reason::queue_bytes, reserved);
          continue;
        }
        if (!reserved && !reserve_one(f)) {
          refuse(f, drop_reason::global_bytes, false);
          continue;
        }
        break;
      }
      case overflow_policy::disconnect: {
        const bool fits = queue_.size() < capacity_ &&
                          (!byte_cap_ || queue_.bytes() + f.size <= byte_cap_) &&
                          (reserved || (reserved = reserve_one(f)));
        if (fits) break;
        // The whole backlog goes, and with it the frames being written (on_written).
        const frame_counts gone = queue_.clear();
        a.drops[reason_index(drop_reason::slow_consumer)] += gone.frames;
        a.discarded += gone.frames;
        a.slow = true;
        give_back(gone.bytes);
        if (writing_) discard_in_flight_ = true;
        // The new frame starts the next connection's queue, if it can fit at all.
        if (capacity_ == 0) {
          refuse(f, drop_reason::queue_full, reserved);
          continue;
        }
        if (byte_cap_ && f.size > byte_cap_) {
          refuse(f, drop_reason::queue_bytes, reserved);
          continue;
        }
        if (!reserved && !(reserved = reserve_one(f))) {
          refuse(f, drop_reason::global_bytes, false);
          continue;
        }
        break;
      }
      case overflow_policy::backpressure: {
        if (!reserved && !reserve_one(f)) {
          budget->force_reserve(f.size);
          a.over_budget = true;
        }
        break;
      }
    }
    queue_.push_back(f);
    ++a.queued;
  }
  if (unreserve) budget->release(unreserve);
}

// ---------------------------------------------------------------------------------------------
// Dialing and the link

void consumer::do_connect() {
  {
    std::lock_guard lock(mutex_);
    link_endpoint_ = endpoint_;
  }
  if (was_connected_) {
    stats_.reconnects.fetch_add(1, std::memory_order_relaxed);
    was_connected_ = false;
  }
  std::error_code ec;
  const auto address = asio::ip::make_address(link_endpoint_.host, ec);
  if (ec) {
    // The loader accepts only literal addresses, so this is a bug upstream; keep retrying in
    // case a reload fixes the endpoint.
    if (++dial_failures_ == 1) {
      GW_LOG(error) << "consumer " << name_ << ": bad endpoint address '" << link_endpoint_.host
                    << "': " << ec.message();
    }
    return schedule_redial();
  }
  state_ = link_state::connecting;
  const std::uint64_t dial = ++dial_id_;
  std::error_code ignored;
  socket_.close(ignored);
  socket_.async_connect(
      asio::ip::tcp::endpoint(address, link_endpoint_.port),
      asio::bind_executor(strand_, [self = shared_from_this(), dial](std::error_code e) {
        lf_pool::promote_new_leader();
        self->on_connect(e, dial);
      }));
}

void consumer::on_connect(std::error_code ec, std::uint64_t dial) {
  if (dial != dial_id_ || state_ != link_state::connecting) return;  // superseded
  if (ec) {
    std::error_code ignored;
    socket_.close(ignored);
    if (++dial_failures_ == 1) {
      GW_LOG(warning) << "consumer " << name_ << " cannot connect to " << link_endpoint_.to_string()
                      << ": " << ec.message() << "; retrying with backoff";
    } else {
      GW_LOG(debug) << "consumer " << name_ << " still cannot connect to "
                    << link_endpoint_.to_string() << ": " << ec.message();
    }
    return schedule_redial();
  }
  std::error_code ignored;
  // Frames are written in whole batches already; Nagle would only delay the batch's tail.
  socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
  dial_failures_ = 0;
  backoff_.reset();
  state_ = link_state::connected;
  bool start = false;
  std::uint64_t conn = 0;
  {
    std::lock_guard lock(mutex_);
    conn = ++conn_id_;
    // The mutex model lets other threads write only once the read below is started: both
    // touch the socket's state.
    connected_ = opts_.drain == drain_model::strand;
    // A write of the previous connection still on its way back (aborted) resumes the drain
    // itself in on_written.
    if (!writing_ && connected_) {
      writing_ = true;
      start = take_batch_locked();
    }
  }
  stats_.connected.store(true, std::memory_order_relaxed);
  GW_LOG(info) << "consumer " << name_ << " connected to " << link_endpoint_.to_string();
  do_read(conn);
  if (opts_.drain == drain_model::mutex) publish_connected_for_callers(conn);
  resume_collected();
  if (start) {
    write_batch();
  } else {
    check_drain();
  }
}

void consumer::schedule_redial() {
  if (finishing_) return;
  state_ = link_state::waiting;
  const auto delay = backoff_.next();
  GW_LOG(debug) << "consumer " << name_ << " redials in " << delay.count() << " ms";
  redial_timer_.expires_after(delay);
  redial_timer_.async_wait(
      asio::bind_executor(strand_, [self = shared_from_this()](std::error_code ec) {
        lf_pool::promote_new_leader();
        self->on_redial_timer(ec);
      }));
}

void consumer::on_redial_timer(std::error_code ec) {
  if (ec || state_ != link_state::waiting) return;  // cancelled: an endpoint change or close
  do_connect();
}

// Consumers send nothing; one small read stays pending only to notice the peer closing
// while the queue is idle (a write would notice too, but only once there is something to send).
void consumer::do_read(std::uint64_t conn) {
  socket_.async_read_some(asio::buffer(discard_),
                          asio::bind_executor(strand_, [self = shared_from_this(), conn](
                                                           std::error_code ec, std::size_t n) {
                            lf_pool::promote_new_leader();
                            self->on_read(ec, n, conn);
                          }));
}

void consumer::on_read(std::error_code ec, std::size_t /*n*/, std::uint64_t conn) {
  if (conn != conn_id_ || state_ != link_state::connected) return;
  if (ec) return connection_lost(conn, ec);
  do_read(conn);
}

void consumer::connection_lost(std::uint64_t conn, std::error_code ec) {
  if (conn != conn_id_ || state_ != link_state::connected) return;  // already handled
  drop_link();
  GW_LOG(warning) << "consumer " << name_ << " lost its connection to "
                  << link_endpoint_.to_string() << ": " << ec.message() << "; redialing";
  schedule_redial();
}

void consumer::close_slow(std::uint64_t conn, std::uint64_t discarded) {
  if (conn != conn_id_ || state_ != link_state::connected) return;
  drop_link();
  GW_LOG(warning) << "consumer " << name_ << " at " << link_endpoint_.to_string()
                  << " is too slow: queue full, " << discarded
                  << " frames discarded; disconnecting";
  schedule_redial();
}

// Closing cancels the pending read and write; their handlers come back with
// operation_aborted, and on_written puts the unsent part of its batch back.
void consumer::drop_link() {
  {
    std::lock_guard lock(mutex_);
    connected_ = false;
  }
  close_link_socket();
  stats_.connected.store(false, std::memory_order_relaxed);
  was_connected_ = true;
  state_ = link_state::waiting;
  dial_failures_ = 0;
}

void consumer::reconfigure(const routing::consumer_spec& spec) {
  bool moved = false;
  {
    std::lock_guard lock(mutex_);
    capacity_ = spec.queue_capacity;
    byte_cap_ = spec.queue_bytes;
    policy_ = spec.overflow;
    queue_.set_capacity_hint(capacity_);
    capacity_view_.store(capacity_, std::memory_order_relaxed);
    policy_view_.store(policy_, std::memory_order_relaxed);
    moved = !(spec.address == endpoint_);
    endpoint_ = spec.address;
    // From here on frames wait for the new endpoint; a batch already out may still go to
    // the old one.
    if (moved) connected_ = false;
  }
  // A larger capacity or a policy other than backpressure may release paused suppliers.
  asio::post(strand_, [self = shared_from_this(), moved] {
    lf_pool::promote_new_leader();
    if (moved) self->change_endpoint();
    {
      std::lock_guard lock(self->mutex_);
      self->collect_resumable_locked();
    }
    self->resume_collected();
  });
}

void consumer::change_endpoint() {
  if (state_ == link_state::idle || state_ == link_state::closed) return;
  redial_timer_.cancel();
  if (state_ == link_state::connected) {
    drop_link();
  } else {
    std::error_code ignored;
    socket_.close(ignored);
  }
  backoff_.reset();
  dial_failures_ = 0;
  do_connect();  // a new dial id: a connect still completing for the old address is ignored
  GW_LOG(info) << "consumer " << name_ << " endpoint changed; dialing "
               << link_endpoint_.to_string();
}

// ---------------------------------------------------------------------------------------------
// Draining

void consumer::do_drain() {
  bool start = false;
  {
    std::lock_guard lock(mutex_);
    start = take_batch_locked();
  }
  resume_collected();
  if (start) {
    write_batch();
  } else {
    check_drain();
  }
}

// With writing_ set by the caller: takes the next batch into in_flight_, or clears writing_
// when there is nothing to send or nowhere to send it.
bool consumer::take_batch_locked() {
  bool taken = false;
  if (connected_ && !queue_.empty()) {
    in_flight_.clear();
    in_flight_bytes_ = queue_.take(max_batch_frames, max_batch_bytes, in_flight_).bytes;
    publish_depth_locked();
    taken = true;
  } else {
    writing_ = false;
    discard_in_flight_ = false;
  }
  collect_resumable_locked();
  return taken;
}

void consumer::write_batch() {
  // Neighbouring frames of one chunk (a supplier's read, routed here in a row) are one iovec.
  buffers_.clear();
  const frame_slice* prev = nullptr;
  for (const auto& f : in_flight_) {
    if (prev && prev->adjacent(f)) {
      const asio::const_buffer last = buffers_.back();
      buffers_.back() = asio::const_buffer(last.data(), last.size() + f.size);
    } else {
      buffers_.emplace_back(f.data(), f.size);
    }
    prev = &f;
  }
  // A span, not the vector: async_write keeps a copy of the sequence it is given.
  asio::async_write(socket_, std::span<const asio::const_buffer>(buffers_),
                    asio::bind_executor(strand_, [self = shared_from_this(), conn = conn_id_](
                                                     std::error_code ec, std::size_t n) {
                      lf_pool::promote_new_leader();
                      self->on_written(ec, n, conn);
                    }));
}

void consumer::on_written(std::error_code ec, std::size_t n, std::uint64_t conn) {
  // Frames the kernel took whole count as sent; the frame cut by an error and everything
  // after it go back to the front of the queue, to be sent whole on the next connection.
  std::size_t sent = 0;
  std::uint64_t sent_bytes = 0;
  while (sent < in_flight_.size() && sent_bytes + in_flight_[sent].size <= n) {
    sent_bytes += in_flight_[sent].size;
    ++sent;
  }
  const std::span<const frame_slice> batch(in_flight_);
  release_slices(batch.first(sent));
  if (opts_.budget) opts_.budget->release(sent_bytes);
  if (sent) {
    stats_.sent_frames.fetch_add(sent, std::memory_order_relaxed);
    stats_.sent_bytes.fetch_add(sent_bytes, std::memory_order_relaxed);
  }
  // Before deciding on the next batch: a broken link must not get another write.
  if (ec && ec != asio::error::operation_aborted) connection_lost(conn, ec);

  const auto rest = batch.subspan(sent);
  std::uint64_t discarded = 0;
  bool more = false;
  {
    std::lock_guard lock(mutex_);
    if (!rest.empty()) {
      if (discard_in_flight_) {
        release_slices(rest);
        discarded = rest.size();
        if (opts_.budget) opts_.budget->release(in_flight_bytes_ - sent_bytes);
      } else {
        queue_.push_front_batch(rest);
      }
    }
    discard_in_flight_ = false;
    in_flight_.clear();
    in_flight_bytes_ = 0;
    publish_depth_locked();
    more = take_batch_locked();
  }
  if (discarded) {
    stats_.dropped[reason_index(drop_reason::slow_consumer)].fetch_add(discarded,
                                                                       std::memory_order_relaxed);
  }
  resume_collected();
  if (more) {
    write_batch();
  } else {
    check_drain();
  }
}

// ---------------------------------------------------------------------------------------------
// Backpressure

bool consumer::below_low_water_locked() const noexcept {
  // Suppliers paused on this consumer are released when it stops taking frames (closing) or
  // stops pausing (a reload changed the policy), else once the queue is down to half.
  if (closing_ || policy_ != routing::overflow_policy::backpressure) return true;
  const std::size_t low_water = std::max<std::size_t>(capacity_ / 2, 1);
  return queue_.size() < low_water && (byte_cap_ == 0 || queue_.bytes() < byte_cap_ / 2);
}

void consumer::collect_resumable_locked() {
  if (waiters_.empty() || !below_low_water_locked()) return;
  // Both vectors keep their capacity: pausing and resuming allocate nothing once warm.
  if (resuming_.empty()) {
    resuming_.swap(waiters_);
  } else {
    resuming_.insert(resuming_.end(), waiters_.begin(), waiters_.end());
    waiters_.clear();
  }
}

void consumer::resume_collected() {
  if (resuming_.empty()) return;
  std::sort(resuming_.begin(), resuming_.end());
  resuming_.erase(std::unique(resuming_.begin(), resuming_.end()), resuming_.end());
  for (const auto& l : resuming_)
    l->resume_reading();
  resuming_.clear();
}

void consumer::publish_depth_locked() noexcept {
  stats_.queued_frames.store(queue_.size(), std::memory_order_relaxed);
  stats_.queued_bytes.store(queue_.bytes(), std::memory_order_relaxed);
}

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
               lf_pool::promote_new_leader();
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
    drain_timer_.async_wait(
        asio::bind_executor(strand_, [self = shared_from_this()](std::error_code ec) {
          lf_pool::promote_new_leader();
          self->on_drain_timer(ec);
        }));
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
    stats_.dropped[reason_index(drain_reason_)].fetch_add(left.frames, std::memory_order_relaxed);
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
