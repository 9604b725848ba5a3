#include "net/gathered_send.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>

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

}  // namespace gatewayd::net
