// The supplier-side concurrency model: which threads run the io_context's handlers and how
// they share events (Leader/Followers, Half-Sync/Half-Async, or plain io_context::run).
#pragma once

#include <asio.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>

#include "runtime/enum_names.hpp"
#include "runtime/latency_histogram.hpp"
#include "runtime/lf_pool.hpp"
#include "runtime/thread_count.hpp"
#include "runtime/work_handoff.hpp"

namespace gatewayd::runtime {

// How the gateway runs its handlers (the reactor threading models compared in docs/).
enum class concurrency_model : std::uint8_t {
  leader_followers,
  half_sync_half_async,
  asio_threads
};
inline constexpr enum_names<concurrency_model, 3> concurrency_model_names{
    {"leader-followers", "half-sync-half-async", "asio-threads"}};
inline std::string_view to_string(concurrency_model m) noexcept {
  return concurrency_model_names(m);
}

class execution_model {
 public:
  using role_counts = lf_pool::role_counts;

  virtual ~execution_model() = default;

  virtual void start() = 0;
  // Ends the threads even if the io_context still has work (the normal way out is to let it
  // run out of work).
  virtual void stop() = 0;
  // Waits for every thread to leave.
  virtual void join() = 0;
  // Threads by role for gatewayd_lf_threads: under Half-Sync/Half-Async the I/O thread is the
  // "leader" and the workers are "processing" or "follower" (idle); plain io_context threads
  // have no roles and report 0.
  virtual role_counts roles() const = 0;
  virtual unsigned size() const noexcept = 0;
  // Promotions (L/F) or hand-offs (HS/HA) that found every thread busy.
  virtual std::uint64_t saturated() const { return 0; }
  // L/F promotions ended by the old leader leading again (lf_pool::leadership_taken_back).
  virtual std::uint64_t taken_back() const { return 0; }
  // Half-Sync/Half-Async's queue to its workers; null when sessions process their own reads.
  virtual work_handoff* handoff() noexcept { return nullptr; }
};

// The model `which` over `ioc` with `threads` threads (0 = one per core). Leader/Followers
// observes its promotion latency into `promotion_latency` and polls for `idle_poll` before an
// idle thread sleeps (lf_pool).
std::unique_ptr<execution_model> make_execution_model(concurrency_model which,
                                                      asio::io_context& ioc, unsigned threads,
                                                      latency_histogram& promotion_latency,
                                                      std::chrono::microseconds idle_poll = {});

}  // namespace gatewayd::runtime
