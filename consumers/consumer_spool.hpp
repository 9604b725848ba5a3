// A consumer's spool as a part of its own: whether its frames go to memory or to the disk, what
// the spool holds that is not read back yet, and which frames in memory are the spool's copies
// (delivered, they are consumed from it). The consumer calls it; it calls only its spool.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "consumers/spool_thread.hpp"
#include "protocol/frame_chunk.hpp"

namespace gatewayd::consumers {

// Where a spooled consumer's new frames go, under the consumer's lock. Every change goes through
// enter(), which holds the table:
//   memory   -> spooling (its queue is at its limits, or it is away or behind: frames go to the
//               disk from here on, behind what is there)
//   spooling -> memory (the spool has nothing unread and no copy of it waits in memory)
// Delivery stays in order: memory, then the spool, then memory again.
class consumer_spool {
 public:
  enum class mode : std::uint8_t { memory, spooling };
  static bool may_enter(mode from, mode to) noexcept { return from != to; }

  // No spool: every call is a no-op and on() is false.
  consumer_spool() = default;
  void attach(std::shared_ptr<spool> s);

  bool on() const noexcept { return spool_ != nullptr; }
  const std::shared_ptr<spool>& files() const noexcept { return spool_; }

  // Under the consumer's lock.
  mode now() const noexcept { return mode_; }
  bool spooling() const noexcept { return mode_ == mode::spooling; }
  void enter(mode to) noexcept;
  // Frames handed to the spool, behind everything, with their references (and CONFIRM entries,
  // settled once synced).
  void append(std::span<const protocol::frame_slice> frames);
  // What the consumer holds in memory goes to the disk, in order (a stop, a removal, or it is
  // away or behind): `held`, everything it holds oldest first with a reference each, except
  // frames still out (a write on its way, frames awaiting acknowledgement: older than `held`).
  // The spool's own copies in `held` are let go (the spool keeps the records: read again after
  // the copies still out), the rest go in front of what the spool holds.
  void spill(std::vector<protocol::frame_slice>& held);
  // Full (spool_max_bytes, or the disk): new frames are refused, or their suppliers paused.
  bool full() const noexcept {
    return spool_ && spool_->stats().full.load(std::memory_order_relaxed);
  }
  // Frames appended that are not read back yet.
  std::uint64_t unread() const noexcept { return unread_; }

  // The consumer's strand.
  // A read of up to `max_bytes` is due: true (and the read asked for) when the spool holds
  // unread frames and no read is out.
  bool read_if_due(std::size_t max_bytes);
  // A read came back: false when it is stale (a spill since: the caller lets them go); else
  // they are copies from here on (the caller queues them).
  bool read_back(std::span<const protocol::frame_slice> frames, std::uint64_t generation);
  // Frames delivered (written whole, or acknowledged), in order: the spool's copies among them
  // are consumed from it.
  void delivered(std::span<const protocol::frame_slice> frames);
  // Its end: true the first time only (the one flush that ends its drain).
  bool first_flush() noexcept { return !std::exchange(flushed_, true); }
  // A copy of a record in memory (queued, in a write, awaiting acknowledgement).
  bool has_copies() const noexcept { return !copies_.empty(); }
  // Nothing unread, no read out, no copy waiting: frames may go to memory again.
  bool drained() const noexcept { return unread_ == 0 && !reading_ && copies_.empty(); }

 private:
  bool is_copy(const protocol::frame_slice& f) const noexcept;
  std::uint64_t copies_left() const noexcept;
  // Keeps the `n` oldest copies (fewer if it has fewer) and forgets the rest: how many it kept.
  std::uint64_t keep_oldest_copies(std::uint64_t n) noexcept;

  std::shared_ptr<spool> spool_;
  mode mode_ = mode::memory;
  std::uint64_t unread_ = 0;  // under the consumer's lock
  // Strand only.
  bool reading_ = false;
  std::uint64_t generation_ = 0;  // a spill makes every read out stale
  std::uint64_t unread_at_read_ = 0;
  bool flushed_ = false;
  // The chunks its copies live in (one per read, copies in order), with the copies of each not
  // delivered yet: a delivered frame in the front chunk is the spool's next record.
  struct copies_in {
    const protocol::frame_chunk* chunk;
    std::uint64_t left;
  };
  std::deque<copies_in> copies_;
};

}  // namespace gatewayd::consumers
