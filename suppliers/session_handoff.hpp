// Where a supplier session hands the bytes it read when another thread parses and routes them
// (the queueing layer of Half-Sync/Half-Async); absent under the other concurrency models.
#pragma once

#include <memory>

namespace gatewayd::suppliers {

class supplier_session;

class session_handoff {
 public:
  virtual ~session_handoff() = default;
  // Any thread, never blocks on the network: queues `session` for a worker, which calls
  // session->process_handoff(). A session is queued at most once at a time.
  virtual void submit(std::shared_ptr<supplier_session> session) = 0;
};

}  // namespace gatewayd::suppliers
