// The consumer's writer: one writer at a time, on the consumer's strand, writes the
// queue with gathered non-blocking writes, to the socket or through its TLS channel; when the
// strand is idle it runs at once in the thread that queued the frames.
#pragma once

#include <cstdint>
#include <span>
#include <system_error>

#include "consumers/frame_packer.hpp"
#include "consumers/write_batch.hpp"

namespace gatewayd::consumers {

class consumer;

class strand_drain {
 public:
  // What one turn writes at most before it yields the thread (posts the rest of its work to
  // the strand): a reading thread that found a consumer idle writes for it, but not forever
  // while other suppliers keep that consumer's queue full.
  static constexpr std::uint64_t turn_bytes = 4 * write_batch::max_bytes;

  explicit strand_drain(consumer& c) noexcept : c_(c) {}

  // `here`: dispatched, not posted: when the consumer's strand is idle the drain runs right
  // here, in the thread that read and routed the frames, so a frame reaches the consumer's
  // socket without waking another thread; when the strand is busy it queues there. Otherwise
  // posted, for a free pool thread to write while this one goes on reading.
  void start(bool here);
  // Strand: a connection came up; `frames_waiting`: the writer role was taken for what
  // queued while the link was down.
  void on_link_up(bool frames_waiting);
  // Strand, under the consumer's lock: the consumer fell behind; the batch being written moves
  // what sits sparsely in its read chunks to `packer` (frame_packer.hpp).
  void compact(frame_packer& packer) { batch_.compact(packer); }

 private:
  // Strand, with the writer role: writes until the queue is empty, the socket refuses more
  // (then waits for it to be writable) or the turn is spent.
  void run();
  // One non-blocking write of `pieces` to the connection: a gathered sendmsg on a plaintext
  // socket (or one whose records the kernel seals), OpenSSL's records on a TLS one. The bytes
  // taken; the error as the socket or the channel reports it.
  std::size_t write(std::span<const iovec> pieces, std::error_code& ec);
  // The next batch, or false after giving the writer role up.
  bool next_batch();
  void wait_writable();

  consumer& c_;
  write_batch batch_;       // strand-only
  std::uint64_t conn_ = 0;  // the connection batch_ is written to
};

}  // namespace gatewayd::consumers
