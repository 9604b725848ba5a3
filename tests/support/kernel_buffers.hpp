// What the kernel holds for one loopback TCP connection and what a process has read, from
// /proc: for tests that account for every byte between the gateway and a peer they kill.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>

namespace gatewayd::test {

// The one established IPv4 connection that has an end at 127.0.0.1:listen_port (the accepted
// side) and whose other end is on this machine (the dialing side).
struct connection_queues {
  std::uint64_t unacknowledged = 0;  // the dialer's tx_queue: written, not yet acked
  std::uint64_t unread = 0;          // the accepted side's rx_queue: received, not yet read
  std::uint64_t returning = 0;       // the accepted side's tx_queue: what it wrote, not yet acked
  bool operator==(const connection_queues&) const = default;
};
// From /proc/net/tcp; nothing when there is no such connection, or more than one.
std::optional<connection_queues> queues_of_connection_to(unsigned short listen_port);

// Bytes process `pid` has taken with read(2) and its kind (rchar of /proc/PID/io), or
// nothing when it cannot be read.
std::optional<std::uint64_t> bytes_read_by(pid_t pid);

}  // namespace gatewayd::test
