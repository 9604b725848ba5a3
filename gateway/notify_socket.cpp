#include "gateway/notify_socket.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <system_error>

namespace gatewayd::gateway {

notify_socket::notify_socket(std::string_view address) {
  // sd_notify(3): a path starts with '/', an abstract name with '@' (a NUL on the wire).
  // (systemd 253's "vsock:" addresses are for virtual machines, not for a service's socket.)
  if (address.empty()) return;
  if (address[0] != '/' && address[0] != '@') {
    problem_ = "NOTIFY_SOCKET=" + std::string(address) +
               " is neither an absolute path nor an abstract name (@...)";
    return;
  }
  if (address.size() > sizeof address_.sun_path - (address[0] == '/' ? 1 : 0)) {
    problem_ = "NOTIFY_SOCKET=" + std::string(address) + " is longer than a unix socket address";
    return;
  }
  address_.sun_family = AF_UNIX;
  std::memcpy(address_.sun_path, address.data(), address.size());
  std::size_t length = address.size();
  if (address[0] == '@') {
    address_.sun_path[0] = '\0';  // the abstract name is exactly its bytes: no NUL after it
  } else {
    ++length;  // a path ends with its NUL, as systemd's own address does
  }
  address_length_ = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + length);
  fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0)
    problem_ = "socket(AF_UNIX): " + std::error_code(errno, std::generic_category()).message();
}

notify_socket::~notify_socket() {
  if (fd_ >= 0) ::close(fd_);
}

notify_socket::result notify_socket::send(std::string_view message) const noexcept {
  if (fd_ < 0) return {outcome::failed, EBADF};
  // Addressed on every send rather than connected once: if systemd re-executes, its socket is
  // bound anew at the same address and the next message finds it.
  const ssize_t n = ::sendto(fd_, message.data(), message.size(), MSG_DONTWAIT | MSG_NOSIGNAL,
                             reinterpret_cast<const sockaddr*>(&address_), address_length_);
  if (n >= 0) return {outcome::sent, 0};
  const int e = errno;
  // ENOBUFS and EINTR pass as EAGAIN does: nothing is wrong with the address, try again.
  if (e == EAGAIN || e == EWOULDBLOCK || e == ENOBUFS || e == EINTR) return {outcome::full, e};
  return {outcome::failed, e};
}

}  // namespace gatewayd::gateway
