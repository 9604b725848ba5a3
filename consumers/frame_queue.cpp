#include "consumers/frame_queue.hpp"

#include <algorithm>

namespace gatewayd::consumers {

namespace {
// Small enough that 1,000 idle consumers cost nothing worth measuring, large enough that a
// trickle of frames does not reallocate every few pushes.
constexpr std::size_t min_slots = 16;
}  // namespace

void frame_queue::push_back(const frame_slice& f) {
  grow_to_fit(size_ + 1);
  ring_[index(size_)] = f;
  ++size_;
  bytes_ += f.size;
}

frame_slice frame_queue::pop_front() noexcept {
  const frame_slice f = ring_[head_];
  head_ = index(1);
  --size_;
  bytes_ -= f.size;
  if (size_ == 0) maybe_shrink();
  return f;
}

std::uint32_t frame_queue::drop_front() noexcept {
  const frame_slice f = pop_front();
  f.chunk->release();
  return f.size;
}

frame_counts frame_queue::take(std::size_t max_frames, std::uint64_t max_bytes,
                               std::vector<frame_slice>& out) {
  frame_counts moved;
  const std::size_t limit = std::min(max_frames, size_);
  while (moved.frames < limit) {
    const frame_slice& f = ring_[index(moved.frames)];
    if (moved.frames > 0 && moved.bytes + f.size > max_bytes) break;
    out.push_back(f);
    moved.bytes += f.size;
    ++moved.frames;
  }
  head_ = index(moved.frames);
  size_ -= moved.frames;
  bytes_ -= moved.bytes;
  if (size_ == 0) maybe_shrink();
  return moved;
}

void frame_queue::push_front_batch(std::span<const frame_slice> frames) {
  if (frames.empty()) return;
  grow_to_fit(size_ + frames.size());
  head_ = (head_ + slots_ - frames.size()) % slots_;
  for (std::size_t i = 0; i < frames.size(); ++i) {
    ring_[index(i)] = frames[i];
    bytes_ += frames[i].size;
  }
  size_ += frames.size();
}

frame_counts frame_queue::clear() noexcept {
  const frame_counts released{size_, bytes_};
  protocol::release_batch batch;
  for (std::size_t i = 0; i < size_; ++i)
    batch.add(ring_[index(i)].chunk);
  batch.flush();
  head_ = size_ = 0;
  bytes_ = 0;
  maybe_shrink();
  return released;
}

void frame_queue::grow_to_fit(std::size_t needed) {
  if (needed <= slots_) return;
  std::size_t next = slots_ ? slots_ * 2 : min_slots;
  // Stop at the configured capacity while it suffices: a full queue then holds exactly
  // capacity slots, not the next power of two.
  if (slots_ < hint_ && next > hint_) next = hint_;
  next = std::max(next, needed);
  auto ring = std::make_unique_for_overwrite<frame_slice[]>(next);
  for (std::size_t i = 0; i < size_; ++i)
    ring[i] = ring_[index(i)];
  ring_ = std::move(ring);
  slots_ = next;
  head_ = 0;
}

// Storage that grew far past the capacity (a backpressure overshoot, a capacity lowered by a
// reload) is given back once the queue empties; ordinary use never gets here, so a queue that
// empties and refills all the time does not reallocate.
void frame_queue::maybe_shrink() noexcept {
  if (slots_ > std::max(hint_, min_slots)) {
    ring_.reset();
    slots_ = 0;
    head_ = 0;
  }
}

}  // namespace gatewayd::consumers
