// The mutex drain model (the strands article's baseline, kept for the benchmark only): the thread
// that queued frames writes them itself with blocking writes, one thread at a time.
#pragma once

#include <cstdint>
#include <mutex>

#include "consumers/drain.hpp"
#include "consumers/write_batch.hpp"

namespace gatewayd::consumers {

class consumer;

class mutex_drain final : public drain {
 public:
  explicit mutex_drain(consumer& c) noexcept : c_(c) {}

  bool writer_per_caller() const noexcept override { return true; }
  // Any thread: blocks until the queue is written (or the link breaks). Always here: that
  // thread's wait is the model's point.
  void start(bool here) override;
  // What queued while the link was down is written off the strand (on any pool thread), so a
  // blocking write never holds up the strand's timers.
  void on_link_up(bool frames_waiting) override;
  // Wakes a writer blocked on a full send buffer (its write fails with EPIPE), then waits for
  // it to let go: closing under its feet could hand the descriptor number to another socket.
  void release_socket() override;
  // The batch belongs to whichever thread holds writer_; the benchmark's baseline leaves it.
  void compact(frame_packer&) override {}

 private:
  consumer& c_;
  std::mutex writer_;  // held by the one thread writing to the socket (taken before c_.mutex_)
  write_batch batch_;  // under writer_
};

}  // namespace gatewayd::consumers
