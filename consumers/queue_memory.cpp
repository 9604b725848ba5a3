#include "consumers/queue_memory.hpp"

#include <malloc.h>

#include <algorithm>

#include "consumers/frame_queue.hpp"
#include "consumers/write_batch.hpp"
#include "protocol/frame_chunk.hpp"

namespace gatewayd::consumers {

namespace {
// What the queues may still hold after the last tick's trim, once they are empty, and yet not
// be worth a trim of their own: less than this fell since.
constexpr std::size_t drained_step = 1u << 20;
}  // namespace

std::size_t queue_memory::chunk_bytes() noexcept {
  return protocol::frame_chunk::live_bytes();
}

std::size_t queue_memory::slot_bytes() noexcept {
  return frame_queue::slot_bytes_total() + write_batch::slot_bytes_total();
}

void queue_memory::check() noexcept {
  const std::size_t now = queued_.used() + chunk_bytes() + slot_bytes();
  peak_ = std::max(peak_, now);
  // A trim when the queued and chunk bytes fell by a step; and once more when the queues are
  // empty, for what their last frames and batches freed after the trim that a step triggered
  // while they were still draining.
  const bool drained = queued_.used() == 0 && peak_ - now >= drained_step;
  if (peak_ - now < step_ && !drained) return;
  ::malloc_trim(0);
  returns_.fetch_add(1, std::memory_order_relaxed);
  returned_bytes_.fetch_add(peak_ - now, std::memory_order_relaxed);
  peak_ = now;
}

}  // namespace gatewayd::consumers
