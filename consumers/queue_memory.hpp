// Hands the memory a burst of queued frames took back to the system once the queues let go of it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "runtime/byte_budget.hpp"

namespace gatewayd::consumers {

// Read chunks are allocated with operator new, on whichever pool thread read, and freed on
// whichever thread released them last; glibc keeps what is freed in that thread's arena, in
// holes between chunks still in use, and returns it to the system only at the top of a heap.
// A burst that queued hundreds of MiB then left the process that much larger after every queue
// had drained (issue 42: 310-505 MiB above idle with 1,000 consumers), and the next fill took
// fresh pages beside the retained ones.
//
// What a burst took beside the chunks (consumers fed by one supplier share them) was found with
// mallinfo2() against the counters here: ~115 MB of live heap after the queues had drained at
// 300 consumers, nearly all the routing threads' per-consumer batches (bounded since by
// suppliers::frame_router::pass_slices), with rings and write batches counted in slot_bytes();
// one malloc arena (gateway/main.cpp) keeps what they free reusable.
// check() runs off the data path (a timer, a few times a second): when the bytes queued plus
// the chunk and slot memory alive have fallen by `step` or more since their highest point since the
// last return, malloc_trim() hands every free page of every arena back. The hot path is untouched;
// the trim takes each arena's lock for about a millisecond per GiB it walks, at most once per tick.
class queue_memory {
 public:
  static constexpr std::size_t default_step = 32u << 20;

  explicit queue_memory(const runtime::byte_budget& queued,
                        std::size_t step = default_step) noexcept
      : queued_(queued), step_(step) {}
  queue_memory(const queue_memory&) = delete;
  queue_memory& operator=(const queue_memory&) = delete;

  // One tick (one thread at a time; readers of the counters may be anywhere).
  void check() noexcept;

  // Chunk bytes alive now: what queued frames and the suppliers' current reads hold, and the
  // per-thread caches (frame_chunk::live_bytes()).
  static std::size_t chunk_bytes() noexcept;
  // Slot bytes alive now: the consumers' queue rings and their write batches' frame and iovec
  // vectors (frame_queue and write_batch count them where they allocate, never per frame).
  static std::size_t slot_bytes() noexcept;
  // How many times, and by how many bytes queued and chunk memory had fallen when it was.
  std::uint64_t returns() const noexcept { return returns_.load(std::memory_order_relaxed); }
  std::uint64_t returned_bytes() const noexcept {
    return returned_bytes_.load(std::memory_order_relaxed);
  }

 private:
  const runtime::byte_budget& queued_;
  const std::size_t step_;
  std::size_t peak_ =
      0;  // queued and chunk bytes at most, as ticks saw them, since the last return
  std::atomic<std::uint64_t> returns_{0};
  std::atomic<std::uint64_t> returned_bytes_{0};
};

}  // namespace gatewayd::consumers
