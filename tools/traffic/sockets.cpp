#include "tools/traffic/sockets.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace gatewayd::traffic {
namespace {

socklen_t to_sockaddr(const net::endpoint& e, sockaddr_storage& addr) {
  addr = {};
  if (e.is_ipv6()) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(e.port);
    inet_pton(AF_INET6, e.host.c_str(), &a->sin6_addr);
    return sizeof(sockaddr_in6);
  }
  auto* a = reinterpret_cast<sockaddr_in*>(&addr);
  a->sin_family = AF_INET;
  a->sin_port = htons(e.port);
  inet_pton(AF_INET, e.host.c_str(), &a->sin_addr);
  return sizeof(sockaddr_in);
}

std::error_code last_error() {
  return {errno, std::system_category()};
}

// Closes `fd` keeping errno's error, for the failure paths.
int fail(int fd, std::error_code& ec) {
  ec = last_error();
  ::close(fd);
  return -1;
}

}  // namespace

int dial(const net::endpoint& to, std::error_code& ec) {
  sockaddr_storage addr;
  const socklen_t len = to_sockaddr(to, addr);
  const int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ec = last_error(), -1;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), len) != 0) return fail(fd, ec);
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{0, 200 * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  ec.clear();
  return fd;
}

int listen_on(const net::endpoint& at, std::error_code& ec, int backlog) {
  sockaddr_storage addr;
  const socklen_t len = to_sockaddr(at, addr);
  const int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ec = last_error(), -1;
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), len) != 0 || ::listen(fd, backlog) != 0)
    return fail(fd, ec);
  ec.clear();
  return fd;
}

std::uint16_t local_port(int fd) noexcept {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                          : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

net::endpoint loopback(std::uint16_t port) {
  return {"127.0.0.1", port};
}

bool send_all(int fd, std::string_view bytes, const std::atomic<bool>& stop, std::error_code& ec,
              std::size_t* written) {
  std::size_t done = 0;
  if (written) *written = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (w > 0) {
      done += static_cast<std::size_t>(w);
      if (written) *written = done;
      continue;
    }
    if (w < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!stop.load(std::memory_order_relaxed)) continue;
      ec = std::make_error_code(std::errc::operation_canceled);
      return false;
    }
    ec = w == 0 ? std::make_error_code(std::errc::connection_reset) : last_error();
    return false;
  }
  ec.clear();
  return true;
}

}  // namespace gatewayd::traffic
