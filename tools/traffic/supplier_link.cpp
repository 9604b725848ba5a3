#include "tools/traffic/supplier_link.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "tools/traffic/payload_header.hpp"
#include "tools/traffic/sockets.hpp"

namespace gatewayd::traffic {
namespace {

std::string local_address(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return {};
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
    return '[' + std::string{text} + "]:" + std::to_string(ntohs(a->sin6_port));
  }
  const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
  inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
  return std::string{text} + ':' + std::to_string(ntohs(a->sin_port));
}

// The socket's pending error (and clears it): ECONNRESET or EPIPE after a reset, else 0.
int socket_error(int fd) {
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  return err;
}

}  // namespace

supplier_link::supplier_link(std::vector<net::endpoint> to, std::size_t first)
    : to_(std::move(to)) {
  if (to_.empty()) throw std::invalid_argument("supplier_link: no address");
  at_ = first % to_.size();
}

supplier_link::~supplier_link() {
  if (fd_ >= 0) ::close(fd_);
}

bool supplier_link::connect(std::error_code& ec) {
  for (std::size_t tried = 0; tried < to_.size(); ++tried) {
    fd_ = dial(to_[at_], ec);
    if (fd_ >= 0) {
      local_ = local_address(fd_);
      return true;
    }
    at_ = (at_ + 1) % to_.size();
  }
  return false;
}

bool supplier_link::reconnect(const std::atomic<bool>& stop, std::uint64_t deadline_ns) {
  std::error_code ec;
  while (!stop.load() && (deadline_ns == 0 || monotonic_ns() < deadline_ns)) {
    if (connect(ec)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// A supplier never receives anything, so readable means end-of-file (asked to leave) or a
// reset (which the next write reports); stray bytes are read and ignored. A gateway that died
// after reading everything sent its end-of-file too, and the reset for what we wrote after it
// may already be here: recv() reports the end-of-file first, so the socket's error is checked.
bool supplier_link::asked_to_leave() {
  if (reset_) return false;
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  char sink[512];
  const ssize_t n = ::recv(fd_, sink, sizeof sink, MSG_DONTWAIT);
  if (n != 0) return false;
  end_of_file_ = true;
  reset_ = socket_error(fd_) != 0;
  return !reset_;
}

ssize_t supplier_link::receive(void* buffer, std::size_t size) {
  const ssize_t n = ::recv(fd_, buffer, size, MSG_DONTWAIT);
  if (n == 0) {
    end_of_file_ = true;
    reset_ = socket_error(fd_) != 0;
  }
  return n;
}

bool supplier_link::send(std::string_view bytes, const std::atomic<bool>& stop,
                         std::error_code& ec) {
  return send_all(fd_, bytes, stop, ec);
}

// After the gateway's end-of-file our end goes to LAST_ACK and is closed by the gateway's
// acknowledgement (a gateway that is stopping: it reads on until it sees our end) or by a
// reset (a gateway that is gone: its kernel refuses what we wrote after it went). One that died
// after reading everything, before we wrote again, acknowledges too: nothing we wrote was lost
// on the connection then, and TCP cannot tell it from a stop.
bool supplier_link::leave() {
  ::shutdown(fd_, SHUT_WR);
  bool clean = true;
  if (end_of_file_) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    tcp_info info{};
    socklen_t len = sizeof info;
    while (::getsockopt(fd_, IPPROTO_TCP, TCP_INFO, &info, &len) == 0 &&
           info.tcpi_state != TCP_CLOSE && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      len = sizeof info;
    }
    reset_ = socket_error(fd_) != 0;
    clean = !reset_;
  }
  close_and_move_on();
  return clean;
}

void supplier_link::drop() {
  close_and_move_on();
}

void supplier_link::close_and_move_on() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  end_of_file_ = false;
  reset_ = false;
  at_ = (at_ + 1) % to_.size();
}

}  // namespace gatewayd::traffic
