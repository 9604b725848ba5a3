// The four overflow policies as a pure function of the queue, its limits and a put() batch:
// which frames join the queue and which are dropped, and why. No sockets and no locks (the
// consumer calls it under its own mutex), so every policy is tested without a network.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <span>

#include "consumers/consumer_stats.hpp"
#include "consumers/frame_queue.hpp"
#include "consumers/overflow_policy.hpp"
#include "consumers/write_batch.hpp"
#include "protocol/frame_chunk.hpp"
#include "runtime/byte_budget.hpp"

namespace gatewayd::consumers {

struct queue_limits {
  std::uint32_t capacity = 10000;  // frames
  std::uint64_t byte_cap = 0;      // 0 = none
  overflow_policy policy = overflow_policy::drop_oldest;
};

// What admitting one batch (or trimming a queue, below) came to.
struct admission {
  std::uint32_t queued = 0;                              // frames of the batch now in the queue
  std::array<std::uint64_t, drop_reason_count> drops{};  // by reason, evictions included
  std::uint64_t discarded = 0;  // the backlog the disconnect policy threw away
  bool slow = false;            // the disconnect policy fired: drop the link
  bool over_budget = false;     // backpressure queued past the global budget
  std::uint32_t confirms = 0;   // CONFIRM frames in the batch (queued or refused)
};

// Admits `frames`, each owning one chunk reference, into `queue`: a queued frame keeps its
// reference, a refused or evicted one hands it to `refused` (rejected: a CONFIRM frame's
// supplier hears it was dropped). Every queued frame holds its bytes
// in `budget` (the gateway-wide byte cap; may be null) until it is sent or dropped. The budget
// is reserved for the whole batch at once; only when that fails (the gateway is near its cap)
// does each frame reserve its own bytes, so the shared counter is touched once per batch.
//
// The policy drops frames only for a `congested` consumer: one that is not connected, or
// whose socket refused bytes since its queue was last empty. A consumer that takes everything
// it is given loses nothing: what queues up behind it is the gateway's own lag (its threads
// read faster than they write), so every frame is queued, past the limits and the budget if
// need be, and the caller pauses the suppliers at the high-water mark instead.
//
// With a `packer` (a congested consumer's, which will hold its frames for long), frames that sit
// sparsely in their read chunk (a run of the batch using under an eighth of it) are queued as
// copies in the packer's chunks, so they do not keep the read chunk alive.
//
// `confirm_room`: how many more CONFIRM frames the consumer may owe before it owes its share of
// the confirm bound and its policy drops (confirm_share.hpp): past it the batch's CONFIRM frames
// are refused (drop reason confirms_owed, their suppliers told `reject` 1), its plain frames
// admitted as ever. Checked frame by frame, as the queue's own bound is, only when the batch
// holds more CONFIRM frames than that.
admission admit(frame_queue& queue, std::span<const frame_slice> frames, const queue_limits& limits,
                runtime::byte_budget* budget, bool congested, frame_packer* packer,
                protocol::release_batch& refused, std::uint64_t confirm_room = UINT64_MAX);

// Applies the policy to what `queue` already holds, when its consumer becomes congested: while
// it kept up every frame was queued, past the limits if need be (above), and from now on the
// limits are the bound a dashboard shows. drop-oldest evicts from the front and drop-newest
// from the back until the queue is within `queue_capacity` and `queue_bytes` (counted as
// queue_full, then queue_bytes, as admit() counts them); disconnect, if the queue is over
// either, throws all of it away (slow_consumer, and `slow`: the caller drops the link);
// backpressure keeps everything. Each frame that goes hands its reference to `released` and its
// bytes back to `budget` (may be null). The gateway-wide budget is not a limit here: the next
// put() applies it, as it does to any consumer.
admission trim(frame_queue& queue, const queue_limits& limits, runtime::byte_budget* budget,
               protocol::release_batch& released);

// True when the queue is at its frame or byte limit (backpressure then pauses suppliers).
bool at_limit(const frame_queue& queue, const queue_limits& limits) noexcept;
// True when the queue is below half its frame and byte limits (paused suppliers then resume).
bool below_half_limits(const frame_queue& queue, const queue_limits& limits) noexcept;

// The gateway's own marks for a consumer that keeps up: past the high one the gateway pauses
// the suppliers feeding it, below the low one (half of it) it resumes them. A few batches'
// worth, and never more than half the queue limits, so the queue stays short (latency, memory)
// and the limits are never what stops a healthy consumer's frames. The read-chunk memory the
// frames pin counts too, against the fixed 4 MiB mark: a consumer fed frames that sit sparsely
// in their chunks pauses its suppliers before it holds much memory.
bool above_high_water(const frame_queue& queue, const queue_limits& limits) noexcept;
bool below_low_water(const frame_queue& queue, const queue_limits& limits) noexcept;

}  // namespace gatewayd::consumers
