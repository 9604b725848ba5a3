// An `ack = true` consumer's frames written whole to its connection and not acknowledged yet,
// in the order written: slices with the chunk reference each owns (no copies).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "protocol/frame_chunk.hpp"

namespace gatewayd::consumers {

// Not thread-safe: the consumer's strand owns it. Acknowledgements take from the front, writes
// add at the back; the front is always one contiguous span, so whoever lets frames go sees them
// as they were written. Storage is a vector with a moving head, compacted once the head has
// would otherwise grow: the steady state allocates nothing.
class unacked_frames {
 public:
  unacked_frames() = default;
  ~unacked_frames();
  unacked_frames(const unacked_frames&) = delete;
  unacked_frames& operator=(const unacked_frames&) = delete;

  std::size_t size() const noexcept { return frames_.size() - head_; }
  bool empty() const noexcept { return size() == 0; }
  std::uint64_t bytes() const noexcept { return bytes_; }

  // Takes over the one reference each slice owns.
  void push_back(std::span<const protocol::frame_slice> written);
  // The oldest `n` frames (n <= size()), still held: valid until the next change.
  std::span<const protocol::frame_slice> front(std::size_t n) const noexcept {
    return std::span<const protocol::frame_slice>(frames_).subspan(head_, n);
  }
  std::span<const protocol::frame_slice> all() const noexcept { return front(size()); }
  // Forgets the oldest `n` frames: the caller took their references over (released them, or
  // moved them elsewhere) through front(n). Returns their bytes.
  std::uint64_t pop_front(std::size_t n) noexcept;

 private:
  std::vector<protocol::frame_slice> frames_;  // owns a reference per frame from head_ on
  std::size_t head_ = 0;
  std::uint64_t bytes_ = 0;
};

}  // namespace gatewayd::consumers
