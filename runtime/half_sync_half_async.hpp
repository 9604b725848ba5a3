// The Half-Sync/Half-Async model (POSA2): one I/O thread runs the io_context (the asynchronous
// layer: readiness, reads, consumer writes, timers); supplier sessions hand each chunk they
// read to a queue (mutex + condition variable, the queueing layer) from which N-1 worker
// threads (the synchronous layer) take it to parse and route. A session waits for readability
// again only after its worker finished, so one connection is still handled by one thread at a
// time and its frames keep their order.
#pragma once

#include <asio.hpp>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/execution_model.hpp"

namespace gatewayd::runtime {

class half_sync_half_async final : public execution_model, public work_handoff {
 public:
  // `threads` in all (0 = one per core): one I/O thread and at least one worker.
  half_sync_half_async(asio::io_context& ioc, unsigned threads);
  ~half_sync_half_async() override;

  void start() override;
  void stop() override;
  void join() override;
  role_counts roles() const override;
  unsigned size() const noexcept override { return 1 + worker_count_; }
  work_handoff* handoff() noexcept override { return this; }
  // Hand-offs that found every worker busy (the request waited in the queue).
  std::uint64_t saturated() const override;

  void submit(std::shared_ptr<offloaded_work> work) override;

 private:
  void run_io();
  void run_worker();
  void end_workers();

  asio::io_context& ioc_;
  const unsigned worker_count_;

  mutable std::mutex mutex_;
  std::condition_variable work_ready_;
  // FIFO: taken from head_; the storage is reused once drained, so a warm queue allocates
  // nothing. Each session is in it at most once, so it never holds more than the sessions.
  std::vector<std::shared_ptr<offloaded_work>> queue_;
  std::size_t head_ = 0;
  unsigned busy_ = 0;
  unsigned idle_ = 0;
  std::uint64_t queued_behind_busy_ = 0;
  bool done_ = false;
  bool io_running_ = false;

  std::thread io_thread_;
  std::vector<std::thread> workers_;
};

}  // namespace gatewayd::runtime
