#include "net/tcp_liveness.hpp"

#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <limits>

namespace gatewayd::net {

namespace {

std::error_code set(int fd, int level, int name, int value) {
  if (::setsockopt(fd, level, name, &value, sizeof value) != 0)
    return {errno, std::system_category()};
  return {};
}

}  // namespace

std::error_code set_liveness(int fd, std::chrono::milliseconds limit) {
  if (limit.count() <= 0) return {};
  // Keepalive only starts the probing of an idle connection: with TCP_USER_TIMEOUT set, the
  // kernel gives up once `limit` has passed without an answer, not after TCP_KEEPCNT probes.
  // First probe after half the limit, then one every sixth: about three before it gives up.
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(limit).count();
  const int idle = static_cast<int>(std::clamp<std::int64_t>(seconds / 2, 1, 32767));
  const int interval = static_cast<int>(std::clamp<std::int64_t>(seconds / 6, 1, 32767));
  const auto user_timeout =
      static_cast<int>(std::min<std::int64_t>(limit.count(), std::numeric_limits<int>::max()));
  struct option {
    int level, name, value;
  };
  const option options[] = {{SOL_SOCKET, SO_KEEPALIVE, 1},
                            {IPPROTO_TCP, TCP_KEEPIDLE, idle},
                            {IPPROTO_TCP, TCP_KEEPINTVL, interval},
                            {IPPROTO_TCP, TCP_KEEPCNT, 3},
                            {IPPROTO_TCP, TCP_USER_TIMEOUT, user_timeout}};
  for (const auto& o : options) {
    if (auto ec = set(fd, o.level, o.name, o.value)) return ec;
  }
  return {};
}

std::uint64_t unacknowledged_bytes(int fd) noexcept {
  int queued = 0;
  if (::ioctl(fd, SIOCOUTQ, &queued) != 0 || queued < 0) return 0;
  return static_cast<std::uint64_t>(queued);
}

bool peer_has_left(int fd) noexcept {
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace gatewayd::net
