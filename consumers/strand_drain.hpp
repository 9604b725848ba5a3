// The consumer's writer: one writer at a time, on the consumer's strand, writes the
// queue with gathered non-blocking writes, to the socket or through its TLS channel; when the
// strand is idle it runs at once in the thread that queued the frames.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <system_error>

#include "consumers/consumer_link.hpp"
#include "consumers/frame_packer.hpp"
#include "consumers/write_batch.hpp"
#include "runtime/executor.hpp"

namespace gatewayd::consumers {

// What the writer asks of the one whose frames it writes (the consumer), on its strand: a batch
// to write, and how each one ended. The only way the writer reaches the queue.
class batch_source {
 public:
  // The next batch into `batch` (empty), and the connection it is for; or false: nothing to
  // send or nowhere to send it, and the writer role is given up.
  virtual bool take_batch(write_batch& batch, std::uint64_t& conn) = 0;
  // The socket took `n` more bytes of `batch`: the frames now written whole are the source's,
  // with the reference each owns (to let go of at once: write_batch::written(), or to hold
  // until the consumer acknowledges them: take_written()).
  virtual void batch_sent(write_batch& batch, std::size_t n) = 0;
  // The socket took less than it was offered: it is full.
  virtual void batch_refused() = 0;
  // The write ended (the connection broke, or went away under it) with `rest` unsent.
  virtual void batch_failed(write_batch& rest) = 0;
  // The owner (its shared_from_this()): every operation the writer has out holds it, so that
  // the writer, a part of it, outlives its operations.
  virtual std::shared_ptr<void> keep_alive() = 0;

 protected:
  ~batch_source() = default;
};

class strand_drain {
 public:
  // What one turn writes at most before it yields the thread (posts the rest of its work to
  // the strand): a reading thread that found a consumer idle writes for it, but not forever
  // while other suppliers keep that consumer's queue full.
  static constexpr std::uint64_t turn_bytes = 4 * write_batch::max_bytes;

  strand_drain(const runtime::strand& strand, consumer_link& link, batch_source& source)
      : strand_(strand), link_(link), source_(source) {}

  // The writer role was taken (from the source, under its lock). `here`: dispatched, not
  // posted: when the strand is idle the drain runs right here, in the thread that read and
  // routed the frames, so a frame reaches the consumer's socket without waking another thread;
  // when the strand is busy it queues there. Otherwise posted, for a free pool thread to write
  // while this one goes on reading.
  void start(bool here);
  // Strand: a connection came up; `frames_waiting`: the writer role was taken for what
  // queued while the link was down.
  void on_link_up(bool frames_waiting);
  // Strand, under the source's lock: the consumer fell behind; the batch being written moves
  // what sits sparsely in its read chunks to `packer` (frame_packer.hpp).
  void compact(frame_packer& packer) { batch_.compact(packer); }
  // Where its batch's CONFIRM frames are counted as settled (write_batch::count_settled_in).
  void count_settled_in(std::atomic<std::uint64_t>* counter) noexcept {
    batch_.count_settled_in(counter);
  }

 private:
  // Strand, with the writer role: writes until the queue is empty, the socket refuses more
  // (then waits for it to be writable) or the turn is spent.
  void run();
  // One non-blocking write of `pieces` to the connection: a gathered sendmsg on a plaintext
  // socket (or one whose records the kernel seals), OpenSSL's records on a TLS one. The bytes
  // taken; the error as the socket or the channel reports it.
  std::size_t write(std::span<const iovec> pieces, std::error_code& ec);
  void wait_writable();

  runtime::strand strand_;
  consumer_link& link_;
  batch_source& source_;
  write_batch batch_;       // strand-only
  std::uint64_t conn_ = 0;  // the connection batch_ is written to
};

}  // namespace gatewayd::consumers
