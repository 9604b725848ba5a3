#include "tools/gateway_peer/http_fetch.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gatewayd::tools {
namespace {

using clock = std::chrono::steady_clock;

class fd_guard {
 public:
  explicit fd_guard(int fd) : fd_(fd) {}
  ~fd_guard() {
    if (fd_ >= 0) ::close(fd_);
  }
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
  int get() const noexcept { return fd_; }

 private:
  int fd_;
};

// Waits until `fd` is ready for `events` or the deadline passes; false on timeout.
bool wait_for(int fd, short events, clock::time_point deadline) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return true;  // the next call reports the error
    if (n < 0) return false;                   // a signal (Ctrl-C): give up at once
  }
}

}  // namespace

http_reply http_fetch(const net::endpoint& at, const std::string& target,
                      std::chrono::milliseconds timeout) {
  http_reply r;
  const auto deadline = clock::now() + timeout;
  sockaddr_storage addr{};
  socklen_t len = 0;
  if (at.is_ipv6()) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(at.port);
    ::inet_pton(AF_INET6, at.host.c_str(), &a->sin6_addr);
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    a->sin_family = AF_INET;
    a->sin_port = htons(at.port);
    ::inet_pton(AF_INET, at.host.c_str(), &a->sin_addr);
    len = sizeof *a;
  }
  fd_guard fd(::socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return r.error = std::strerror(errno), r;
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 && errno != EINPROGRESS)
    return r.error = std::strerror(errno), r;
  if (!wait_for(fd.get(), POLLOUT, deadline)) return r.error = "timed out connecting", r;
  int so_error = 0;
  socklen_t so_len = sizeof so_error;
  ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &so_len);
  if (so_error != 0) return r.error = std::strerror(so_error), r;

  const std::string request =
      "GET " + target + " HTTP/1.0\r\nHost: " + at.to_string() + "\r\nConnection: close\r\n\r\n";
  for (std::size_t sent = 0; sent < request.size();) {
    const ssize_t n = ::send(fd.get(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!wait_for(fd.get(), POLLOUT, deadline)) return r.error = "timed out sending", r;
    } else {
      return r.error = std::strerror(errno), r;
    }
  }
  std::string reply;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n > 0) {
      reply.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno == EAGAIN || errno == EINTR) {
      if (!wait_for(fd.get(), POLLIN, deadline)) return r.error = "timed out reading", r;
    } else {
      return r.error = std::strerror(errno), r;
    }
  }
  // "HTTP/1.x NNN reason\r\n...\r\n\r\nbody"
  const auto head_end = reply.find("\r\n\r\n");
  if (reply.rfind("HTTP/1.", 0) != 0 || reply.size() < 12 || head_end == std::string::npos)
    return r.error = "not an HTTP reply", r;
  r.status = std::atoi(reply.c_str() + 9);
  r.body = reply.substr(head_end + 4);
  return r;
}

}  // namespace gatewayd::tools
