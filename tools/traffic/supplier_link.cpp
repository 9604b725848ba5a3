#include "tools/traffic/supplier_link.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

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
// reset (which the next write reports); stray bytes are read and ignored.
bool supplier_link::asked_to_leave() {
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  char sink[512];
  const ssize_t n = ::recv(fd_, sink, sizeof sink, MSG_DONTWAIT);
  return n == 0;
}

bool supplier_link::send(std::string_view bytes, const std::atomic<bool>& stop,
                         std::error_code& ec) {
  return send_all(fd_, bytes, stop, ec);
}

void supplier_link::leave() {
  ::shutdown(fd_, SHUT_WR);
  close_and_move_on();
}

void supplier_link::drop() {
  close_and_move_on();
}

void supplier_link::close_and_move_on() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  at_ = (at_ + 1) % to_.size();
}

}  // namespace gatewayd::traffic
