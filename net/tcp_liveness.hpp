// Kernel-side liveness of an established TCP connection: keepalive probes while it is idle and
// TCP_USER_TIMEOUT while data is out, so a vanished peer is noticed within a bound.
#pragma once

#include <chrono>
#include <cstdint>
#include <system_error>

namespace gatewayd::net {

// After `limit` without an acknowledgement of what was sent (a host gone without a word, or a
// peer whose receive window stays closed), or without an answer to keepalive probes on an
// idle connection, the kernel aborts it and the next read or write fails with ETIMEDOUT.
// A zero limit leaves the kernel's defaults (about 15 minutes to notice, 2 hours when idle).
std::error_code set_liveness(int fd, std::chrono::milliseconds limit);

// Bytes written to the connection that its peer's host has not acknowledged (SIOCOUTQ): at a
// failed connection's end, what was counted as sent but never arrived. 0 if unknown.
std::uint64_t unacknowledged_bytes(int fd) noexcept;

// The peer has ended its side (its FIN, a reset, or an error on the connection), even with
// what it sent before still unread: asked of the kernel (POLLRDHUP) without reading or
// waiting. For an owner that is not reading (paused) and would otherwise not notice.
bool peer_has_left(int fd) noexcept;

}  // namespace gatewayd::net
