#include "consumers/queue_memory.hpp"

#include <malloc.h>

#include <algorithm>

#include "protocol/frame_chunk.hpp"

namespace gatewayd::consumers {

std::size_t queue_memory::chunk_bytes() noexcept {
  return protocol::frame_chunk::live_bytes();
}

void queue_memory::check() noexcept {
  const std::size_t now = queued_.used() + chunk_bytes();
  peak_ = std::max(peak_, now);
  if (peak_ - now < step_) return;
  ::malloc_trim(0);
  returns_.fetch_add(1, std::memory_order_relaxed);
  returned_bytes_.fetch_add(peak_ - now, std::memory_order_relaxed);
  peak_ = now;
}

}  // namespace gatewayd::consumers
