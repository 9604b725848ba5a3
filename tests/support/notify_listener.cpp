#include "tests/support/notify_listener.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <system_error>

namespace gatewayd::test {
namespace {

std::string framed(const std::string& text) {
  std::string s = "\n";
  s += text;
  s += '\n';
  return s;
}

}  // namespace

notify_listener::notify_listener(const std::string& address) : address_(address) {
  if (address.empty() || address.size() >= sizeof addr_.sun_path)
    throw std::invalid_argument("notify_listener: bad address " + address);
  addr_.sun_family = AF_UNIX;
  std::memcpy(addr_.sun_path, address.data(), address.size());
  std::size_t length = address.size();
  if (address[0] == '@') {
    addr_.sun_path[0] = '\0';
  } else {
    ++length;
  }
  addr_length_ = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + length);
  fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0 || ::bind(fd_, reinterpret_cast<const sockaddr*>(&addr_), addr_length_) != 0) {
    const int e = errno;
    if (fd_ >= 0) ::close(fd_);
    throw std::system_error(e, std::generic_category(), "notify_listener: bind " + address);
  }
}

notify_listener::~notify_listener() {
  for (int f : fillers_)
    ::close(f);
  ::close(fd_);
}

std::optional<notify_listener::message> notify_listener::next(std::chrono::milliseconds timeout) {
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return std::nullopt;
  char buffer[4096];
  const ssize_t n = ::recv(fd_, buffer, sizeof buffer, MSG_DONTWAIT);
  if (n < 0) return std::nullopt;
  message m{std::string(buffer, static_cast<std::size_t>(n)), clock::now()};
  seen_.push_back(m);
  return m;
}

std::optional<notify_listener::message> notify_listener::wait_for(
    const std::string& line, std::chrono::milliseconds timeout) {
  const auto deadline = clock::now() + timeout;
  while (clock::now() < deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    auto m = next(std::max(left, std::chrono::milliseconds(1)));
    if (m && has_line(m->text, line)) return m;
  }
  return std::nullopt;
}

bool notify_listener::fill(std::size_t max_datagrams) {
  static constexpr char filler[] = "FILLER=1";
  std::size_t sent = 0;
  while (sent < max_datagrams) {
    const int s = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return false;
    fillers_.push_back(s);
    for (bool fresh = true; sent < max_datagrams; fresh = false) {
      if (::sendto(s, filler, sizeof filler - 1, MSG_DONTWAIT,
                   reinterpret_cast<const sockaddr*>(&addr_), addr_length_) >= 0) {
        ++sent;
        continue;
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
      if (fresh) return true;
      break;  // this sender's own buffer is full: the next datagrams go from a fresh one
    }
  }
  return false;
}

bool notify_listener::has_line(const std::string& text, const std::string& line) {
  return framed(text).find(framed(line)) != std::string::npos;
}

std::optional<std::string> notify_listener::value_of(const std::string& text,
                                                     const std::string& key) {
  const auto full = framed(text);
  const std::string start_of = "\n" + key + "=";
  const auto at = full.find(start_of);
  if (at == std::string::npos) return std::nullopt;
  const auto start = at + start_of.size();
  return full.substr(start, full.find('\n', start) - start);
}

}  // namespace gatewayd::test
