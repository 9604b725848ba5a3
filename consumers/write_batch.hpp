// The frames of one gathered write: taken from the queue in order, coalesced into iovecs, and
// settled as the socket takes their bytes. The strand drain writes through it.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "consumers/frame_packer.hpp"
#include "consumers/frame_queue.hpp"

namespace gatewayd::consumers {

// A frame is handed on (released, or held until acknowledged) only once the socket took all of
// its bytes. When
// a write is cut, the cut frame and everything after it stay in the batch; on a broken
// connection they go back to the front of the queue, so a frame is never sent in part to a
// new connection: the next one gets it whole, from its first byte.
class write_batch {
 public:
  // One gathered write carries at most this much: enough to amortise the syscall over many
  // frames, small enough that a batch stuck on a slow peer holds little outside the queue
  // (where the overflow policy cannot reach it).
  static constexpr std::size_t max_frames = 1024;
  static constexpr std::uint64_t max_bytes = 1u << 20;

  write_batch() = default;
  write_batch(const write_batch&) = delete;
  write_batch& operator=(const write_batch&) = delete;
  ~write_batch();

  bool empty() const noexcept { return next_ == frames_.size(); }
  // Bytes not yet written (of the cut frame, only its rest).
  std::uint64_t unwritten_bytes() const noexcept { return bytes_ - written_; }

  // Moves the oldest frames of `queue` into the (empty) batch, with their references: at most
  // `bytes` of them (and max_bytes), but always one.
  frame_counts fill(frame_queue& queue, std::uint64_t bytes = max_bytes);
  // What is left to write, neighbouring slices of one chunk merged into one iovec (a
  // supplier's read, routed here in a row, is one buffer). Valid until the batch changes.
  std::span<const iovec> unwritten();
  // Frames written whole, and their bytes (known without walking them again).
  struct written_frames {
    std::span<const frame_slice> slices;
    std::uint64_t bytes = 0;
    frame_counts counts() const noexcept { return {slices.size(), bytes}; }
  };
  // The socket took `n` more bytes: the frames now written whole, with the reference each
  // owns, are the caller's (valid until the batch changes).
  written_frames take_written(std::size_t n);
  // The same, delivered at once in the same walk (settled and released, as
  // protocol::deliver_slices does); what they were (to be counted as sent and their budget
  // given back).
  frame_counts written(std::size_t n);
  // The connection broke: what was not written whole goes back to the front of `queue`.
  frame_counts return_to(frame_queue& queue);
  // The disconnect policy threw the backlog away (`why`: dropped), or the consumer went with
  // it (removed): what was not written whole is released, rejected for `why`.
  frame_counts discard(protocol::give_up why) noexcept;
  // What is not written yet and sits sparsely in its read chunks moves to `packer`'s chunks
  // (a frame cut by a partial write moves whole and goes on from the same offset).
  void compact(frame_packer& packer);
  // Where the CONFIRM frames it settles are counted: its consumer's confirms_settled. Set once.
  void count_settled_in(std::atomic<std::uint64_t>* counter) noexcept { settled_count_ = counter; }
  // Bytes of the slots (frames and iovecs) every batch in the process has allocated: a batch
  // keeps them between writes, so a consumer that once wrote a full batch costs about 40 KiB
  // for its life (a slot memory gauge beside the queues' rings).
  static std::size_t slot_bytes_total() noexcept;

 private:
  // Counts what the vectors' capacity changed by since `frames`/`buffers` (per batch, never
  // per frame).
  void count_slots(std::size_t frames, std::size_t buffers) noexcept;

  void reset() noexcept;
  // Moves past the frames the socket's `n` more bytes completed, calling on_whole(slice) for
  // each.
  template <class OnWhole>
  written_frames pass_written(std::size_t n, OnWhole&& on_whole);

  std::vector<frame_slice> frames_;  // owns a reference per frame from next_ on
  std::size_t next_ = 0;             // the first frame not yet written whole
  std::uint64_t bytes_ = 0;          // of all frames in the batch
  std::uint64_t written_ = 0;        // bytes the socket took so far
  std::uint32_t cut_ = 0;            // bytes of frames_[next_] already written
  std::vector<iovec> buffers_;
  std::atomic<std::uint64_t>* settled_count_ = nullptr;
};

}  // namespace gatewayd::consumers
