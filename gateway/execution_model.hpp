// The supplier-side concurrency model: which threads run the io_context's handlers and how
// they share events (Leader/Followers, Half-Sync/Half-Async, or plain io_context::run).
#pragma once

#include <asio.hpp>
#include <memory>

#include "gateway/lf_pool.hpp"
#include "gateway/service_config.hpp"
#include "suppliers/session_handoff.hpp"

namespace gatewayd::gateway {

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
  // Half-Sync/Half-Async's queue to its workers; null when sessions process their own reads.
  virtual suppliers::session_handoff* handoff() noexcept { return nullptr; }
};

// The model `which` over `ioc` with `threads` threads (0 = one per core). Leader/Followers
// runs the gateway's existing `pool`.
std::unique_ptr<execution_model> make_execution_model(concurrency_model which,
                                                      asio::io_context& ioc, lf_pool& pool,
                                                      unsigned threads);

}  // namespace gatewayd::gateway
