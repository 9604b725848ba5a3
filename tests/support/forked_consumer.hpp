// A verifying traffic consumer in a child process that a test can SIGKILL mid-stream, its
// tally kept in shared memory so what it saw before it died still counts.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "tools/traffic/traffic_consumer.hpp"

namespace gatewayd::test {

// A consumer_tally in memory shared with processes forked later; freed by the destructor.
class shared_tally {
 public:
  shared_tally();
  ~shared_tally();
  shared_tally(const shared_tally&) = delete;
  shared_tally& operator=(const shared_tally&) = delete;
  traffic::consumer_tally& operator*() const noexcept { return *tally_; }
  traffic::consumer_tally* operator->() const noexcept { return tally_; }

 private:
  traffic::consumer_tally* tally_;
};

// traffic::serve_traffic_consumer for stream `me` in a forked child. Binds 127.0.0.1:port
// before returning, so the gateway can dial it at once.
pid_t fork_traffic_consumer(std::uint16_t port, unsigned me, traffic::consumer_tally& tally);
// SIGKILLs the child (by the pid fork_traffic_consumer returned) and reaps it.
void kill_consumer_process(pid_t pid);

}  // namespace gatewayd::test
