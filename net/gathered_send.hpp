// One gathered write of a whole batch with sendmsg(2): up to IOV_MAX buffers in one syscall.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <span>
#include <system_error>

#include <asio/error.hpp>

namespace gatewayd::net {

// Asio's write_some hands the kernel at most 64 buffers per call; a batch of mixed-address
// traffic has one buffer per frame (its neighbours in the chunk went to other consumers), so
// Asio would cut it into pieces of 64 frames, a syscall and a reader wake-up each. This sends
// up to IOV_MAX (1,024 on Linux, write_batch's frame limit) at once. Never blocks on a
// non-blocking socket (would_block instead), never raises SIGPIPE. Returns the bytes taken.
std::size_t gathered_send(int fd, std::span<const iovec> buffers, std::error_code& ec) noexcept;

// The error of a write to a full non-blocking socket: gathered_send reports errno in
// std::system_category(), a TLS channel Asio's enum (asio::error::would_block), which converts to
// Asio's own "asio.system" category and compares unequal to the other: both are tested.
inline bool socket_full(const std::error_code& ec) noexcept {
  return ec == std::errc::operation_would_block ||
         ec == std::errc::resource_unavailable_try_again || ec == asio::error::would_block ||
         ec == asio::error::try_again;
}

}  // namespace gatewayd::net
