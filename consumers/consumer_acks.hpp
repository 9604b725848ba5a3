// A consumer's acks as a part of its own: where its written frames go, settled at once, or, for
// an `ack = true` consumer, held until its acks cover them (within max_unacked_bytes) and
// redelivered first on its next connection.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "consumers/ack_reader.hpp"
#include "consumers/consumer_stats.hpp"
#include "consumers/frame_queue.hpp"
#include "consumers/unacked_frames.hpp"
#include "consumers/write_batch.hpp"

namespace gatewayd::consumers {

// The owner's strand, but the limit, which a reload sets from any thread. Every frame it lets go
// settles its CONFIRM entry (delivered, or given up as the caller says) and is counted in the
// stats' settled CONFIRM frames; it publishes the frames it holds (stats' unacked gauges).
class consumer_acks {
 public:
  consumer_acks(bool acks, std::uint64_t max_unacked_bytes, consumer_stats& stats) noexcept
      : acks_(acks), max_unacked_bytes_(max_unacked_bytes), stats_(stats) {}
  consumer_acks(const consumer_acks&) = delete;
  consumer_acks& operator=(const consumer_acks&) = delete;

  // It acknowledges what it takes (`ack = true`): fixed for its life (a reload replaces it).
  bool acks() const noexcept { return acks_; }
  // A reload changed max_unacked_bytes.
  void set_limit(std::uint64_t bytes) noexcept {
    max_unacked_bytes_.store(bytes, std::memory_order_relaxed);
  }

  bool empty() const noexcept { return unacked_.empty(); }
  // An `ack` consumer holds max_unacked_bytes: nothing more may be written until acks make room.
  bool full() const noexcept { return acks_ && unacked_.bytes() >= limit(); }
  // How many bytes the next batch may carry (but one frame always goes).
  std::uint64_t room() const noexcept {
    return acks_ ? limit() - unacked_.bytes() : write_batch::max_bytes;
  }

  // Told of the frames each ack delivers, before they are let go (a spooled consumer's copies
  // leave its spool then). Set once, before use.
  void observe(std::function<void(std::span<const frame_slice>)> observer) {
    observer_ = std::move(observer);
  }

  // A connection is up: its acks count from its first frame written.
  void connection_up() noexcept { unacked_.connection_up(); }
  // The socket took `n` more bytes of `batch`: the frames written whole are delivered (settled
  // and released) or, acknowledged ones, held. What they were (sent, their budget given back).
  frame_counts written(write_batch& batch, std::size_t n) {
    if (!acks_) return batch.written(n);  // delivered in the same walk that finds them
    return hold_written(batch, n);
  }
  // `ack n` on the connection up: delivers what it covers, or says why it is a protocol error.
  // `covered`: how many frames it delivered.
  ack_error acknowledge(std::uint64_t n, std::size_t& covered);
  // Once per connection `conn`: frames held for an earlier one go back in front of `queue`,
  // to be written first on this one. What moved (to count against the queue's budget).
  frame_counts redeliver_to(frame_queue& queue, std::uint64_t conn);
  // A handover: every frame held goes to `out` (appended, oldest first, references with them).
  void hand_over(std::vector<frame_slice>& out);
  // Its end (or a destroyed io_context): every frame held is given up as `why` says (rejected,
  // or left unsettled). How many there were.
  std::size_t abandon_all(protocol::give_up why) noexcept;

 private:
  frame_counts hold_written(write_batch& batch, std::size_t n);
  std::uint64_t limit() const noexcept {
    return max_unacked_bytes_.load(std::memory_order_relaxed);
  }
  void publish() noexcept;

  const bool acks_;
  std::atomic<std::uint64_t> max_unacked_bytes_;
  consumer_stats& stats_;
  unacked_frames unacked_;  // an `ack` consumer's frames written and not acknowledged yet
  std::function<void(std::span<const frame_slice>)> observer_;
};

}  // namespace gatewayd::consumers
