#include "net/gathered_send.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <vector>

namespace gatewayd::net {

std::size_t gathered_send(int fd, std::span<const iovec> buffers, std::error_code& ec) noexcept {
  ec.clear();
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(buffers.data());
  msg.msg_iovlen = std::min<std::size_t>(buffers.size(), IOV_MAX);
  for (;;) {
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno == EINTR) continue;
    ec.assign(errno, std::system_category());
    return 0;
  }
}

std::size_t gathered_send_all(int fd, std::span<const iovec> buffers, std::error_code& ec) {
  std::vector<iovec> rest(buffers.begin(), buffers.end());
  std::size_t total = 0;
  std::size_t first = 0;
  while (first < rest.size()) {
    const std::size_t n = gathered_send(fd, std::span(rest).subspan(first), ec);
    if (socket_full(ec)) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, -1);
      continue;
    }
    if (ec) return total;
    total += n;
    // Skip what was written: whole buffers, then the written part of the next one.
    std::size_t left = n;
    while (first < rest.size() && rest[first].iov_len <= left)
      left -= rest[first++].iov_len;
    if (first < rest.size()) {
      rest[first].iov_base = static_cast<char*>(rest[first].iov_base) + left;
      rest[first].iov_len -= left;
    }
  }
  return total;
}

}  // namespace gatewayd::net
