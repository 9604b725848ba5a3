// The three concurrency models the harness compares, over one io_context: Leader/Followers
// (the product's runtime::lf_pool), Half-Sync/Half-Async (one I/O thread, workers fed by a
// mutex and condition variable queue) and asio-threads (N threads in io_context::run()).
#pragma once

#include <asio.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "runtime/enum_names.hpp"
#include "runtime/latency_histogram.hpp"
#include "runtime/lf_pool.hpp"

namespace gatewayd::harness {

class harness_session;

enum class model : std::uint8_t { leader_followers, half_sync_half_async, asio_threads };
inline constexpr runtime::enum_names<model, 3> model_names{
    {"leader-followers", "half-sync-half-async", "asio-threads"}};

// Half-Sync/Half-Async's queueing layer: sessions whose read the I/O thread handed over, each
// parsed, routed and enqueued by the next free worker.
class handoff_queue {
 public:
  // Any thread; never blocks on the network. A session is queued at most once at a time.
  void submit(std::shared_ptr<harness_session> session);
  // A worker's loop, until stop().
  void work();
  void stop();

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::shared_ptr<harness_session>> queue_;
  bool stopped_ = false;
};

class model_runner {
 public:
  // `threads`: every thread of the model (Half-Sync/Half-Async: the I/O thread and threads - 1
  // workers, at least one). Leader/Followers records its promotion latency in `promotion` and
  // polls for `idle_poll` before an idle thread sleeps, as gatewayd's [gateway] idle_poll_us.
  model_runner(model which, asio::io_context& ioc, unsigned threads,
               runtime::latency_histogram& promotion, std::chrono::microseconds idle_poll);
  ~model_runner();
  model_runner(const model_runner&) = delete;
  model_runner& operator=(const model_runner&) = delete;

  // Where sessions hand their reads: Half-Sync/Half-Async only, else null.
  handoff_queue* handoff() noexcept;
  void start();
  // Ends the threads although the io_context still has work (benchmark code: no drain).
  void stop_and_join();

  model which() const noexcept { return which_; }
  unsigned threads() const noexcept { return threads_; }
  // Leader/Followers' threads by role (null under the other models).
  std::optional<runtime::lf_pool::role_counts> roles() const;

 private:
  const model which_;
  asio::io_context& ioc_;
  const unsigned threads_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::optional<runtime::lf_pool> pool_;
  handoff_queue handoff_;
  std::vector<std::thread> running_;
};

}  // namespace gatewayd::harness
