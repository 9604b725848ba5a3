// A verifying traffic consumer in a child process that a test can SIGKILL mid-stream, its
// tally kept in shared memory so what it saw before it died still counts.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

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

// An `ack = true` consumer endpoint in a forked child that several gateway nodes may dial at
// once (one group member shared by every node): it acknowledges what it reads on each
// connection and records every frame's traffic sequence in shared memory, so what it read
// still counts once it is SIGKILLed. With `stall_after` it stops reading, and so
// acknowledging, once it has read that many frames, its connections left open: a replica that
// hangs holding frames written to it and never acknowledged.
class forked_ack_member {
 public:
  explicit forked_ack_member(std::uint64_t stall_after = 0);  // 0: never stalls
  ~forked_ack_member();                                       // kills the child if alive
  forked_ack_member(const forked_ack_member&) = delete;
  forked_ack_member& operator=(const forked_ack_member&) = delete;

  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }
  bool stalled() const noexcept;
  // The sequence of every frame it read, in order of arrival (a frame read twice, twice).
  std::vector<std::uint64_t> sequences() const;
  std::uint64_t corruptions() const noexcept;
  // More frames came than the shared record holds (the sequences are then incomplete).
  bool overflowed() const noexcept;
  // SIGKILL, then reaped.
  void kill();

 private:
  struct record;
  record* record_;
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
};

}  // namespace gatewayd::test
