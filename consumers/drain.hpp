// Who writes a consumer's queue to its socket ([gateway] consumer_drain): the strategy behind the
// consumer's writes, one per model, sharing write_batch for coalescing and settling.
#pragma once

#include <cstdint>

#include "consumers/frame_packer.hpp"

namespace gatewayd::consumers {

class drain {
 public:
  virtual ~drain() = default;

  // True when every thread that queued frames writes them itself, one at a time (the mutex
  // model); false when one writer at a time owns the queue (the strand model), so put() starts
  // a drain only when none runs.
  virtual bool writer_per_caller() const noexcept = 0;
  // Frames are waiting on a connected consumer: write them. Any thread; put() calls it
  // outside the consumer's lock, after taking the writer role for the strand model.
  // `here`: the caller's thread may write them itself (put()'s `drain_here`).
  virtual void start(bool here) = 0;
  // Strand: a connection came up; `frames_waiting`: the writer role was taken for what
  // queued while the link was down.
  virtual void on_link_up(bool frames_waiting) = 0;
  // Strand: the socket is about to close; a writer still inside it must let go first.
  virtual void release_socket() = 0;
  // Strand, under the consumer's lock: the consumer fell behind; the batch being written moves
  // what sits sparsely in its read chunks to `packer` (frame_packer.hpp).
  virtual void compact(frame_packer& packer) = 0;
};

}  // namespace gatewayd::consumers
