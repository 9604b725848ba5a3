#include "consumers/frame_queue.hpp"

#include <algorithm>

namespace gatewayd::consumers {

using protocol::frame_chunk;

namespace {
// Small enough that 1,000 idle consumers cost nothing worth measuring, large enough that a
// trickle of frames does not reallocate every few pushes.
constexpr std::size_t min_slots = 16;
// Counted where a ring is allocated or freed (never per frame): the slot memory gauge.
std::atomic<std::size_t> ring_bytes{0};
}  // namespace

frame_queue::~frame_queue() {
  clear(std::nullopt);
  reallocate(0);
}

std::size_t frame_queue::slot_bytes_total() noexcept {
  return ring_bytes.load(std::memory_order_relaxed);
}

namespace {
std::uint64_t chunk_bytes(const frame_slice& f) noexcept {
  return f.chunk->capacity();
}
}  // namespace

void frame_queue::push_back_run(std::span<const frame_slice> run, std::uint64_t bytes) {
  if (run.empty()) return;
  grow_to_fit(size_ + run.size());
  if (size_ == 0 || ring_[index(size_ - 1)].chunk != run.front().chunk)
    pinned_ += chunk_bytes(run.front());
  // At most two copies: up to the ring's end, then from its start.
  const std::size_t at = index(size_);
  const std::size_t first = std::min(run.size(), slots_ - at);
  std::copy_n(run.data(), first, ring_.get() + at);
  std::copy_n(run.data() + first, run.size() - first, ring_.get());
  size_ += run.size();
  bytes_ += bytes;
}

void frame_queue::push_back(const frame_slice& f) {
  grow_to_fit(size_ + 1);
  if (size_ == 0 || ring_[index(size_ - 1)].chunk != f.chunk) pinned_ += chunk_bytes(f);
  ring_[index(size_)] = f;
  ++size_;
  bytes_ += f.size;
}

frame_slice frame_queue::pop_front() noexcept {
  const frame_slice f = ring_[head_];
  head_ = index(1);
  --size_;
  bytes_ -= f.size;
  if (size_ == 0 || ring_[head_].chunk != f.chunk) pinned_ -= chunk_bytes(f);
  if (size_ == 0) maybe_shrink();
  return f;
}

frame_slice frame_queue::pop_back() noexcept {
  const frame_slice f = ring_[index(size_ - 1)];
  --size_;
  bytes_ -= f.size;
  if (size_ == 0 || ring_[index(size_ - 1)].chunk != f.chunk) pinned_ -= chunk_bytes(f);
  if (size_ == 0) maybe_shrink();
  return f;
}

std::uint32_t frame_queue::drop_front(protocol::reject_reason why) noexcept {
  const frame_slice f = pop_front();
  protocol::release_batch released(settled_count_);
  released.rejected(f, why);
  return f.size;
}

frame_counts frame_queue::take(std::size_t max_frames, std::uint64_t max_bytes,
                               std::vector<frame_slice>& out) {
  frame_counts moved;
  const std::size_t limit = std::min(max_frames, size_);
  const frame_slice* const ring = ring_.get();
  std::size_t at = head_;
  while (moved.frames < limit) {
    const frame_slice& f = ring[at];
    if (moved.frames > 0 && moved.bytes + f.size > max_bytes) break;
    // A run leaves the count when its last frame leaves the queue: here, when the next frame
    // (taken too, or staying) is of another chunk, or there is none.
    const std::size_t next = at + 1 == slots_ ? 0 : at + 1;
    if (moved.frames + 1 == size_ || ring[next].chunk != f.chunk) pinned_ -= chunk_bytes(f);
    moved.bytes += f.size;
    ++moved.frames;
    at = next;
  }
  // At most two copies: up to the ring's end, then from its start.
  const std::size_t first = std::min<std::size_t>(moved.frames, slots_ - head_);
  out.insert(out.end(), ring + head_, ring + head_ + first);
  out.insert(out.end(), ring, ring + (moved.frames - first));
  head_ = index(moved.frames);
  size_ -= moved.frames;
  bytes_ -= moved.bytes;
  if (size_ == 0) maybe_shrink();
  return moved;
}

void frame_queue::push_front_batch(std::span<const frame_slice> frames) {
  if (frames.empty()) return;
  grow_to_fit(size_ + frames.size());
  // A frame starts a run unless the one after it (the next put back, or the old front) shares
  // its chunk.
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const frame_chunk* next = i + 1 < frames.size() ? frames[i + 1].chunk
                              : size_ > 0           ? ring_[head_].chunk
                                                    : nullptr;
    if (next != frames[i].chunk) pinned_ += chunk_bytes(frames[i]);
  }
  head_ = (head_ + slots_ - frames.size()) % slots_;
  for (std::size_t i = 0; i < frames.size(); ++i) {
    ring_[index(i)] = frames[i];
    bytes_ += frames[i].size;
  }
  size_ += frames.size();
}

frame_counts frame_queue::clear(protocol::give_up why) noexcept {
  const frame_counts released{size_, bytes_};
  protocol::release_batch batch(settled_count_);
  for (std::size_t i = 0; i < size_; ++i)
    batch.rejected(ring_[index(i)], why);
  batch.flush();
  head_ = size_ = 0;
  bytes_ = 0;
  pinned_ = 0;
  maybe_shrink();
  return released;
}

void frame_queue::compact(frame_packer& packer) {
  protocol::release_batch released;
  std::size_t run = 0;
  while (run < size_) {
    const frame_slice& first = ring_[index(run)];
    std::size_t end = run;
    std::uint64_t run_bytes = 0;
    while (end < size_ && ring_[index(end)].chunk == first.chunk)
      run_bytes += ring_[index(end++)].size;
    if (frame_packer::sparse(run_bytes, first.chunk->capacity())) {
      for (std::size_t i = run; i < end; ++i) {
        frame_slice& slot = ring_[index(i)];
        const frame_slice copy = packer.pack(slot);
        released.add(slot.chunk);
        slot = copy;
      }
    }
    run = end;
  }
  pinned_ = 0;
  for (std::size_t i = 0; i < size_; ++i) {
    if (i + 1 == size_ || ring_[index(i + 1)].chunk != ring_[index(i)].chunk)
      pinned_ += chunk_bytes(ring_[index(i)]);
  }
}

void frame_queue::grow(std::size_t needed) {
  std::size_t next = slots_ ? slots_ * 2 : min_slots;
  // Stop at the configured capacity while it suffices: a full queue then holds exactly
  // capacity slots, not the next power of two.
  if (slots_ < hint_ && next > hint_) next = hint_;
  reallocate(std::max(next, needed));
}

void frame_queue::fit_to_hint() {
  const std::size_t keep = std::max(hint_, min_slots);
  if (slots_ > keep && size_ <= keep) reallocate(size_ == 0 ? 0 : keep);
}

// Moves the queued frames, in order, to a ring of `slots` (0: none; never fewer than size_).
void frame_queue::reallocate(std::size_t slots) {
  std::unique_ptr<frame_slice[]> ring;
  if (slots) ring = std::make_unique_for_overwrite<frame_slice[]>(slots);
  for (std::size_t i = 0; i < size_; ++i)
    ring[i] = ring_[index(i)];
  ring_bytes.fetch_add(slots * sizeof(frame_slice), std::memory_order_relaxed);
  ring_bytes.fetch_sub(slots_ * sizeof(frame_slice), std::memory_order_relaxed);
  ring_ = std::move(ring);
  slots_ = slots;
  head_ = 0;
}

// Storage that grew past the capacity (a backpressure overshoot, a capacity lowered by a
// reload) is given back once the queue empties; up to the capacity it is kept, so a queue that
// empties and refills all the time does not reallocate. Giving back more (an emptied ring kept
// 4,096 slots at most) cost the fan-out shape 28 instructions a frame in reallocations
// (bench/instructions --shape fanout): its queues cycle past that between empty and the
// high-water mark. What rings keep is gatewayd_queue_slot_bytes: at most queue_capacity x 24 B
// per consumer.
void frame_queue::maybe_shrink() noexcept {
  // (The queue is empty here: reallocate(0) allocates nothing and copies nothing.)
  if (slots_ > std::max(hint_, min_slots)) reallocate(0);
}

}  // namespace gatewayd::consumers
