// A consumer's FIFO of frames: a growable ring of slices that owns one chunk reference each.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "consumers/frame_packer.hpp"
#include "protocol/frame_chunk.hpp"

namespace gatewayd::consumers {

// Frames and bytes moved or released by one operation.
struct frame_counts {
  std::uint64_t frames = 0;
  std::uint64_t bytes = 0;
};

inline frame_counts count(std::span<const frame_slice> frames) noexcept {
  frame_counts c{frames.size(), 0};
  for (const auto& f : frames)
    c.bytes += f.size;
  return c;
}

// The CONFIRM frames among `frames` (a handover's debts move with them).
inline std::uint32_t confirms_in(std::span<const frame_slice> frames) noexcept {
  std::uint32_t n = 0;
  for (const auto& f : frames)
    n += f.confirm != nullptr;
  return n;
}

// Not thread-safe: the owning consumer's mutex guards it. No bound either: admission (the
// overflow policy, consumers/admission.hpp) decides what to evict or refuse before it pushes,
// so the queue itself never refuses a frame.
//
// Storage grows geometrically (16, 32, ... slots) and stops at the capacity hint while it is
// enough, so an idle or lightly used consumer costs a few hundred bytes however large its
// configured capacity; past the hint (a backpressure overshoot, a put-back batch) it keeps
// doubling, and goes back to the hint once a dropping policy trims it (fit_to_hint) or it
// empties. The steady state allocates nothing.
class frame_queue {
 public:
  explicit frame_queue(std::size_t capacity_hint = 0) noexcept : hint_(capacity_hint) {}
  ~frame_queue();  // (the gateway is going: nobody is told)
  frame_queue(const frame_queue&) = delete;
  frame_queue& operator=(const frame_queue&) = delete;

  std::size_t size() const noexcept { return size_; }
  std::uint64_t bytes() const noexcept { return bytes_; }
  // Chunk memory the queued frames keep alive: each run of neighbouring frames of one chunk
  // counts the chunk once (an upper bound: two runs of one chunk count it twice). What the
  // queue costs, as opposed to bytes(), what it carries.
  std::uint64_t pinned_bytes() const noexcept { return pinned_; }
  bool empty() const noexcept { return size_ == 0; }
  // Slots allocated (for tests and memory accounting), not the configured capacity.
  std::size_t slots() const noexcept { return slots_; }
  void set_capacity_hint(std::size_t hint) noexcept { hint_ = hint; }
  // Storage grown past the capacity hint (frames queued past the capacity while the consumer
  // counted as keeping up, then trimmed to its limits by a dropping policy) goes back to the
  // hint as soon as the queue fits in it again, not only once it empties: off the per-frame
  // path (its callers run when a consumer falls behind or loses its link). Not under
  // backpressure: there the overshoot is what a pass had in flight, and it comes back with
  // every pause, so fitting each time reallocated the ring per cycle.
  void fit_to_hint();
  // Bytes of ring slots allocated by every queue in the process (the metrics' slot memory):
  // what queued frames cost beside their chunks.
  static std::size_t slot_bytes_total() noexcept;
  // Where the CONFIRM frames this queue drops are counted as settled: its consumer's
  // confirms_settled (what it owes is its own, consumer_stats.hpp). Set once, before use.
  void count_settled_in(std::atomic<std::uint64_t>* counter) noexcept { settled_count_ = counter; }

  // Takes over the one reference `f` owns.
  void push_back(const frame_slice& f);
  // The same for a run of neighbouring frames of one chunk (`bytes`: theirs in all), at once:
  // what a supplier's read routes to an uncongested consumer.
  void push_back_run(std::span<const frame_slice> run, std::uint64_t bytes);
  const frame_slice& front() const noexcept { return ring_[head_]; }
  // Hands the oldest frame and its reference to the caller.
  frame_slice pop_front() noexcept;
  // Releases the oldest frame, rejected for `why`; returns its size in bytes.
  std::uint32_t drop_front(protocol::reject_reason why) noexcept;
  // Hands the newest frame and its reference to the caller (drop-newest trimming a queue that
  // grew past its limits while its consumer kept up).
  frame_slice pop_back() noexcept;

  // Moves up to `max_frames` oldest frames, and no more than `max_bytes` unless the first
  // frame alone is larger (a batch is never empty while the queue is not), to the end of `out`
  // together with their references.
  frame_counts take(std::size_t max_frames, std::uint64_t max_bytes, std::vector<frame_slice>& out);
  // Puts frames taken earlier back in front of everything, in their order, with their refs.
  void push_front_batch(std::span<const frame_slice> frames);
  // Releases every frame, each rejected for `why` (a CONFIRM frame's supplier hears it), or
  // left unsettled (none: a stop); returns what was released.
  frame_counts clear(protocol::give_up why) noexcept;
  // Moves the frames of sparse runs (frame_packer::sparse) into `packer`'s own chunks,
  // releasing their hold on the read chunks; order and bytes() stay as they were.
  void compact(frame_packer& packer);

 private:
  std::size_t index(std::size_t i) const noexcept {
    const std::size_t at = head_ + i;
    return at < slots_ ? at : at - slots_;
  }
  void grow_to_fit(std::size_t needed) {
    if (needed > slots_) grow(needed);
  }
  [[gnu::noinline]] void grow(std::size_t needed);
  void reallocate(std::size_t slots);
  void maybe_shrink() noexcept;

  std::unique_ptr<frame_slice[]> ring_;
  std::size_t slots_ = 0;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
  std::uint64_t bytes_ = 0;
  std::uint64_t pinned_ = 0;
  std::size_t hint_;
  std::atomic<std::uint64_t>* settled_count_ = nullptr;
};

}  // namespace gatewayd::consumers
