#include "consumers/consumer.hpp"

#include <algorithm>

#include "runtime/log.hpp"

namespace gatewayd::consumers {

using protocol::frame_slice;

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

consumer::consumer(const runtime::executor& ex, consumer_spec spec, options opts)
    : name_(std::move(spec.name)),
      opts_(opts),
      strand_(runtime::make_strand(ex)),
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

overflow_policy consumer::policy() const noexcept {
  return policy_view_.load(std::memory_order_relaxed);
}

void consumer::start() {
  asio::post(strand_, [self = shared_from_this()] {
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
      if (policy_ == overflow_policy::backpressure &&
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
      self->close_slow(close_conn, n);
    });
  }
  if (post_drain) {
    asio::post(strand_, [self = shared_from_this()] { self->do_drain(); });
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
                      self->on_written(ec, n, conn);
                    }));
}

frame_counts consumer::settle_written(std::span<const frame_slice> batch, std::size_t n) {
  std::size_t sent = 0;
  std::uint64_t sent_bytes = 0;
  while (sent < batch.size() && sent_bytes + batch[sent].size <= n) {
    sent_bytes += batch[sent].size;
    ++sent;
  }
  release_slices(batch.first(sent));
  if (opts_.budget) opts_.budget->release(sent_bytes);
  if (sent) {
    stats_.sent_frames.fetch_add(sent, std::memory_order_relaxed);
    stats_.sent_bytes.fetch_add(sent_bytes, std::memory_order_relaxed);
  }
  return {sent, sent_bytes};
}

void consumer::on_written(std::error_code ec, std::size_t n, std::uint64_t conn) {
  // Frames the kernel took whole count as sent; the frame cut by an error and everything
  // after it go back to the front of the queue, to be sent whole on the next connection.
  const std::span<const frame_slice> batch(in_flight_);
  const auto [sent, sent_bytes] = settle_written(batch, n);
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
  if (closing_ || policy_ != overflow_policy::backpressure) return true;
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

}  // namespace gatewayd::consumers
