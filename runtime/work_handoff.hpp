// Where the I/O thread hands a piece of work that another thread finishes (the queueing layer
// of Half-Sync/Half-Async); absent under the other concurrency models.
#pragma once

#include <memory>

namespace gatewayd::runtime {

// Work handed to another thread: a supplier session whose read must be parsed and routed.
class offloaded_work {
 public:
  // On the worker thread; must hand its result back to its own strand (post), never block on
  // the network.
  virtual void run_offloaded() = 0;

 protected:
  ~offloaded_work() = default;
};

class work_handoff {
 public:
  virtual ~work_handoff() = default;
  // Any thread, never blocks: queues `work` for a worker, which calls work->run_offloaded().
  // The caller queues one piece of work at most once at a time.
  virtual void submit(std::shared_ptr<offloaded_work> work) = 0;
};

}  // namespace gatewayd::runtime
