#include "tests/support/raw_suppliers.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "tests/support/test_peers.hpp"

namespace gatewayd::test {

void raise_fd_limit() {
  rlimit r{};
  ::getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &r);
}

int dial(unsigned short port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool send_all(int fd, const std::string& bytes) {
  std::size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

bool is_closed(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  char sink[4096];
  const ssize_t n = ::recv(fd, sink, sizeof sink, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

bool all_closed_within(const std::vector<int>& fds, std::chrono::milliseconds timeout) {
  std::vector<bool> done(fds.size(), false);
  return eventually(
      [&] {
        bool all = true;
        for (std::size_t i = 0; i < fds.size(); ++i) {
          if (!done[i]) done[i] = is_closed(fds[i]);
          all = all && done[i];
        }
        return all;
      },
      timeout);
}

void close_all(std::vector<int>& fds) {
  for (int fd : fds)
    ::close(fd);
  fds.clear();
}

std::string frame_header(std::uint16_t address_length, std::uint32_t payload_length) {
  std::string h = {'G', 'W', 1, 0};
  h += static_cast<char>(address_length >> 8);
  h += static_cast<char>(address_length & 0xff);
  for (int i = 3; i >= 0; --i)
    h += static_cast<char>((payload_length >> (8 * i)) & 0xff);
  return h;
}

}  // namespace gatewayd::test
