// An `ack = true` consumer's frames written whole to its connection and not acknowledged yet,
// in the order written (slices with the chunk reference each owns: no copies), and the count
// its acks are checked against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "consumers/ack_reader.hpp"
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

  // A connection is up: its acks count from its first frame written.
  void connection_up() noexcept {
    written_ = 0;
    acked_ = 0;
  }
  // True, once per connection `conn` (the first time it is asked for it), when frames held
  // for an earlier one are to go first on it: the caller takes them all (all(), pop_front).
  bool redeliver_on(std::uint64_t conn) noexcept {
    if (conn_ == conn) return false;
    conn_ = conn;
    return !empty();
  }
  // Written whole to the connection: takes over the one reference each slice owns.
  void push_back(std::span<const protocol::frame_slice> written);
  // `ack n` on the connection: how many held frames it covers, from the front (n counts the
  // data frames written to it from 1), or why it is a protocol error (below the last ack,
  // above what was written).
  ack_error acknowledge(std::uint64_t n, std::size_t& covered) noexcept;
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
  // All held frames were written on connection conn_ (frames of an earlier one are redelivered
  // before the next batch), the first written_ frames of it, acked_ of them acknowledged.
  std::uint64_t conn_ = 0;
  std::uint64_t written_ = 0;
  std::uint64_t acked_ = 0;
};

}  // namespace gatewayd::consumers
