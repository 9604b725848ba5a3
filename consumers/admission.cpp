#include "consumers/admission.hpp"

#include <algorithm>

namespace gatewayd::consumers {
namespace {

// One batch's admission: the policies share the bookkeeping of what leaves the queue and what
// is refused, and differ only in what they do when a frame does not fit.
class admitter {
 public:
  admitter(frame_queue& queue, const queue_limits& limits, runtime::byte_budget* budget,
           protocol::release_batch& refused, std::uint64_t batch_bytes)
      : queue_(queue),
        limits_(limits),
        budget_(budget),
        refused_(refused),
        batch_reserved_(!budget || budget->try_take_optimistic(batch_bytes)) {}

  ~admitter() {
    if (unreserve_) budget_->give_back(unreserve_);
  }

  admission& result() noexcept { return a_; }

  void offer(const frame_slice& f, bool congested, frame_packer* pack_into) {
    // `reserved`: the frame's bytes are held in the budget (and must be given back if it goes).
    bool reserved = batch_reserved_;
    if (f.confirm && !take_confirm()) {
      refuse(f, drop_reason::confirms_owed, reserved);
      return;
    }
    bool keep = false;
    switch (congested ? limits_.policy : overflow_policy::backpressure) {
      case overflow_policy::drop_oldest:
        keep = drop_oldest(f, reserved);
        break;
      case overflow_policy::drop_newest:
        keep = drop_newest(f, reserved);
        break;
      case overflow_policy::disconnect:
        keep = disconnect(f, reserved);
        break;
      case overflow_policy::backpressure:
        keep = backpressure(f, reserved);
        break;
    }
    if (!keep) return;
    if (pack_into) {
      queue_.push_back(pack_into->pack(f));
      refused_.add(f.chunk);  // the read chunk's reference goes: the copy holds its own
    } else {
      queue_.push_back(f);
    }
    ++a_.queued;
  }

  // Uncongested, with the batch's bytes reserved, every frame is kept as it is (offer() would
  // find nothing to check): a run of one chunk then goes in at once.
  bool keeps_whole_runs(bool congested) const noexcept {
    return !congested && batch_reserved_ && !limit_confirms_;
  }
  // The batch holds more CONFIRM frames than the consumer may still owe: each takes room.
  void limit_confirms(std::uint64_t room) noexcept {
    limit_confirms_ = true;
    confirm_room_ = room;
  }
  void keep_run(std::span<const frame_slice> run, std::uint64_t bytes) {
    queue_.push_back_run(run, bytes);
    a_.queued += static_cast<std::uint32_t>(run.size());
  }

 private:
  bool take_confirm() noexcept {
    if (!limit_confirms_) return true;
    if (confirm_room_ == 0) return false;
    --confirm_room_;
    return true;
  }
  bool fits_frames() const noexcept { return queue_.size() < limits_.capacity; }
  bool fits_bytes(const frame_slice& f) const noexcept {
    return !limits_.byte_cap || queue_.bytes() + f.size <= limits_.byte_cap;
  }

  bool drop_oldest(const frame_slice& f, bool& reserved) {
    while (!queue_.empty() && !fits_frames())
      evict_oldest(drop_reason::queue_full);
    while (!queue_.empty() && !fits_bytes(f))
      evict_oldest(drop_reason::queue_bytes);
    if (never_fits(f, reserved)) return false;
    if (reserved) return true;
    while (!(reserved = budget_->try_take_optimistic(f.size)) && !queue_.empty())
      evict_oldest(drop_reason::global_bytes);
    if (!reserved) refuse(f, drop_reason::global_bytes, false);
    return reserved;
  }

  bool drop_newest(const frame_slice& f, bool& reserved) {
    if (!fits_frames()) return refuse(f, drop_reason::queue_full, reserved);
    if (!fits_bytes(f)) return refuse(f, drop_reason::queue_bytes, reserved);
    return reserve_or_refuse(f, reserved);
  }

  bool disconnect(const frame_slice& f, bool& reserved) {
    if (fits_frames() && fits_bytes(f) &&
        (reserved || (reserved = budget_->try_take_optimistic(f.size))))
      return true;
    // The whole backlog goes (and with it the batch being written: the consumer's business);
    // the new frame starts the next connection's queue if it can fit at all.
    const frame_counts gone = queue_.clear(protocol::reject_reason::dropped);
    a_.drops[index(drop_reason::slow_consumer)] += gone.frames;
    a_.discarded += gone.frames;
    a_.slow = true;
    give_back(gone.bytes);
    if (never_fits(f, reserved)) return false;
    return reserve_or_refuse(f, reserved);
  }

  bool backpressure(const frame_slice& f, bool& reserved) {
    // Never drops: past the budget it queues anyway and the suppliers are paused instead; the
    // overshoot is bounded by what they had already read.
    if (!reserved && !budget_->try_take_optimistic(f.size)) {
      budget_->take(f.size);
      a_.over_budget = true;
    }
    return true;
  }

  // Capacity 0, or a frame larger than the whole byte cap: nothing evicted would make room.
  bool never_fits(const frame_slice& f, bool reserved) {
    if (limits_.capacity == 0) return !refuse(f, drop_reason::queue_full, reserved);
    if (limits_.byte_cap && f.size > limits_.byte_cap)
      return !refuse(f, drop_reason::queue_bytes, reserved);
    return false;
  }

  bool reserve_or_refuse(const frame_slice& f, bool& reserved) {
    if (reserved || (reserved = budget_->try_take_optimistic(f.size))) return true;
    return refuse(f, drop_reason::global_bytes, false);
  }

  void evict_oldest(drop_reason why) {
    const frame_slice old = queue_.pop_front();
    refused_.rejected(old, reject_for(why));
    ++a_.drops[index(why)];
    give_back(old.size);
  }

  // Always false: "not kept".
  bool refuse(const frame_slice& f, drop_reason why, bool reserved) {
    refused_.rejected(f, reject_for(why));
    ++a_.drops[index(why)];
    if (reserved) give_back(f.size);
    return false;
  }

  // Bytes leaving the queue: deferred to one release on the batch path, given back at once on
  // the per-frame path, where the next reservation needs them.
  void give_back(std::uint64_t bytes) {
    if (!budget_) return;
    if (batch_reserved_) {
      unreserve_ += bytes;
    } else {
      budget_->give_back(bytes);
    }
  }

  static constexpr std::size_t index(drop_reason r) noexcept { return static_cast<std::size_t>(r); }

  frame_queue& queue_;
  const queue_limits& limits_;
  runtime::byte_budget* budget_;
  protocol::release_batch& refused_;
  const bool batch_reserved_;
  bool limit_confirms_ = false;
  std::uint64_t confirm_room_ = 0;
  std::uint64_t unreserve_ = 0;
  admission a_;
};

}  // namespace

admission admit(frame_queue& queue, std::span<const frame_slice> frames, const queue_limits& limits,
                runtime::byte_budget* budget, bool congested, frame_packer* packer,
                protocol::release_batch& refused, std::uint64_t confirm_room) {
  std::uint64_t batch_bytes = 0;
  std::uint32_t confirms = 0;
  for (const auto& f : frames) {
    batch_bytes += f.size;
    confirms += f.confirm != nullptr;
  }
  admitter a(queue, limits, budget, refused, batch_bytes);
  a.result().confirms = confirms;
  // Only a batch with more CONFIRM frames than the consumer may still owe goes frame by frame.
  if (confirms > confirm_room) a.limit_confirms(confirm_room);
  std::size_t run = 0;
  while (run < frames.size()) {
    // A run: neighbouring frames of one read chunk. Sparse ones are copied when packing.
    std::size_t end = run;
    std::uint64_t run_bytes = 0;
    while (end < frames.size() && frames[end].chunk == frames[run].chunk)
      run_bytes += frames[end++].size;
    frame_packer* const pack_into =
        packer && frame_packer::sparse(run_bytes, frames[run].chunk->capacity()) ? packer : nullptr;
    if (!pack_into && a.keeps_whole_runs(congested)) {
      a.keep_run(frames.subspan(run, end - run), run_bytes);
    } else {
      for (std::size_t i = run; i < end; ++i)
        a.offer(frames[i], congested, pack_into);
    }
    run = end;
  }
  return a.result();
}

admission trim(frame_queue& queue, const queue_limits& limits, runtime::byte_budget* budget,
               protocol::release_batch& released) {
  admission a;
  std::uint64_t freed = 0;
  const auto over_frames = [&] { return queue.size() > limits.capacity; };
  const auto over_bytes = [&] { return limits.byte_cap && queue.bytes() > limits.byte_cap; };
  const auto drop = [&](const frame_slice& f, drop_reason why) {
    released.rejected(f, reject_for(why));
    ++a.drops[static_cast<std::size_t>(why)];
    freed += f.size;
  };
  switch (limits.policy) {
    case overflow_policy::drop_oldest:
      while (over_frames())
        drop(queue.pop_front(), drop_reason::queue_full);
      while (over_bytes())
        drop(queue.pop_front(), drop_reason::queue_bytes);
      break;
    case overflow_policy::drop_newest:
      while (over_frames())
        drop(queue.pop_back(), drop_reason::queue_full);
      while (over_bytes())
        drop(queue.pop_back(), drop_reason::queue_bytes);
      break;
    case overflow_policy::disconnect:
      if (over_frames() || over_bytes()) {
        const frame_counts gone = queue.clear(protocol::reject_reason::dropped);
        a.drops[static_cast<std::size_t>(drop_reason::slow_consumer)] += gone.frames;
        a.discarded = gone.frames;
        a.slow = true;
        freed += gone.bytes;
      }
      break;
    case overflow_policy::backpressure:
      break;
  }
  if (budget) budget->give_back(freed);
  return a;
}

bool at_limit(const frame_queue& queue, const queue_limits& limits) noexcept {
  return queue.size() >= limits.capacity || (limits.byte_cap && queue.bytes() >= limits.byte_cap);
}

bool below_half_limits(const frame_queue& queue, const queue_limits& limits) noexcept {
  return queue.size() < std::max<std::size_t>(limits.capacity / 2, 1) &&
         (limits.byte_cap == 0 || queue.bytes() < limits.byte_cap / 2);
}

namespace {

// Four batches of a gathered write: enough that a writer never runs dry while its suppliers
// are paused and resumed, few enough that a healthy consumer's queue stays short.
constexpr std::size_t high_water_frames = 4 * write_batch::max_frames;
constexpr std::uint64_t high_water_bytes = 4 * write_batch::max_bytes;

std::size_t high_frames(const queue_limits& l) noexcept {
  return std::max<std::size_t>(1, std::min<std::size_t>(high_water_frames, l.capacity / 2));
}
std::uint64_t high_bytes(const queue_limits& l) noexcept {
  return std::max<std::uint64_t>(
      1, l.byte_cap ? std::min(high_water_bytes, l.byte_cap / 2) : high_water_bytes);
}

}  // namespace

// Frames and bytes count against marks derived from the queue's limits; the chunk memory the
// frames pin counts against the fixed mark alone (one frame pins a whole 64 KiB chunk, which a
// small byte cap must not turn into a pause per frame).
bool above_high_water(const frame_queue& queue, const queue_limits& limits) noexcept {
  return queue.size() >= high_frames(limits) || queue.bytes() >= high_bytes(limits) ||
         queue.pinned_bytes() >= high_water_bytes;
}

bool below_low_water(const frame_queue& queue, const queue_limits& limits) noexcept {
  return queue.size() < std::max<std::size_t>(1, high_frames(limits) / 2) &&
         queue.bytes() < std::max<std::uint64_t>(1, high_bytes(limits) / 2) &&
         queue.pinned_bytes() < high_water_bytes / 2;
}

}  // namespace gatewayd::consumers
