#include "net/kernel_tls_probe.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace gatewayd::net {

namespace {

// A descriptor closed when it goes out of scope.
struct owned_fd {
  int fd;
  ~owned_fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string_view to_string(kernel_tls_state s) noexcept {
  switch (s) {
    case kernel_tls_state::loaded:
      return "loaded";
    case kernel_tls_state::not_loaded:
      return "not loaded";
    case kernel_tls_state::unknown:
      break;
  }
  return "unknown";
}

kernel_tls_state probe_kernel_tls() noexcept {
  // The kernel takes a ULP only on an established connection: a loopback pair, never accepted
  // (the kernel completes the handshake for the backlog).
  const owned_fd listener{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  if (listener.fd < 0) return kernel_tls_state::unknown;
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof at;
  if (::bind(listener.fd, reinterpret_cast<const sockaddr*>(&at), sizeof at) != 0 ||
      ::listen(listener.fd, 1) != 0 ||
      ::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&at), &len) != 0) {
    return kernel_tls_state::unknown;
  }
  const owned_fd client{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  if (client.fd < 0 ||
      ::connect(client.fd, reinterpret_cast<const sockaddr*>(&at), sizeof at) != 0) {
    return kernel_tls_state::unknown;
  }
  constexpr char ulp[] = "tls";
  if (::setsockopt(client.fd, SOL_TCP, TCP_ULP, ulp, sizeof ulp - 1) == 0) {
    return kernel_tls_state::loaded;
  }
  return errno == ENOENT ? kernel_tls_state::not_loaded : kernel_tls_state::unknown;
}

}  // namespace gatewayd::net
