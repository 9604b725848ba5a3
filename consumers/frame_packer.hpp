// Copies frames into chunks of a consumer's own, back to back: what a lagging consumer holds
// then pins about as much memory as its frames take, however sparse the read chunks were.
#pragma once

#include <cstdint>

#include "protocol/frame_chunk.hpp"

namespace gatewayd::consumers {

using protocol::frame_slice;

// A queued frame is a slice of the supplier's read chunk and keeps the whole chunk alive. A
// consumer that keeps up holds its frames briefly, so sharing the chunk costs nothing; one that
// lags holds them for long, and a small frame can pin a 64 KiB chunk otherwise full of frames
// nobody wanted. Such frames are moved into the packer's chunks: the copy costs a memcpy of the
// frame, and only for a consumer that is already behind.
class frame_packer {
 public:
  // A run of frames of one chunk is worth moving when it uses less of its chunk than this.
  static constexpr unsigned sparse_divisor = 8;

  frame_packer() = default;
  frame_packer(const frame_packer&) = delete;
  frame_packer& operator=(const frame_packer&) = delete;

  // True when `run_bytes` of frames keep a chunk of `capacity` bytes alive for little use.
  static bool sparse(std::uint64_t run_bytes, std::size_t capacity) noexcept {
    return run_bytes * sparse_divisor < capacity;
  }

  // A copy of `f` in the packer's current chunk, owning one reference to it and carrying `f`'s
  // confirm entry (the copy settles it). `f` and its reference are left as they were: the
  // caller releases that reference alone (release_batch::add).
  frame_slice pack(const frame_slice& f);
  // The consumer caught up: its packed frames hold their chunks; the packer keeps none.
  void let_go() noexcept {
    chunk_.reset();
    used_ = 0;
  }

 private:
  protocol::chunk_ptr chunk_;  // the packer's own hold on the chunk it fills
  std::uint32_t used_ = 0;
};

}  // namespace gatewayd::consumers
