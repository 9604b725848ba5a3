// systemd's end of the notify socket, for tests: a unix datagram socket bound at a path (as
// systemd's own is) or at an abstract name, read only when and as fast as the test decides.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace gatewayd::test {

class notify_listener {
 public:
  using clock = std::chrono::steady_clock;
  struct message {
    std::string text;
    clock::time_point at;
  };

  // `address` as NOTIFY_SOCKET names it: a path, or '@' and an abstract name. Throws when it
  // cannot be bound.
  explicit notify_listener(const std::string& address);
  ~notify_listener();
  notify_listener(const notify_listener&) = delete;
  notify_listener& operator=(const notify_listener&) = delete;

  const std::string& address() const noexcept { return address_; }
  std::string env() const { return "NOTIFY_SOCKET=" + address_; }

  // The next datagram within `timeout` (kept in seen()).
  std::optional<message> next(std::chrono::milliseconds timeout);
  // Reads until a datagram holds `line` (a whole "KEY=value" line); earlier ones are kept in
  // seen().
  std::optional<message> wait_for(const std::string& line, std::chrono::milliseconds timeout);
  const std::vector<message>& seen() const noexcept { return seen_; }

  // Sends datagrams of its own ("FILLER=1", as other services write to PID 1's one socket)
  // until the kernel queues no more for this socket: true once a fresh sender's first datagram
  // is refused (EAGAIN), which only a full receive queue does (a sender's own buffer can fill
  // first, hence fresh senders). The queue holds net.unix.max_dgram_qlen + 1 datagrams.
  bool fill(std::size_t max_datagrams = 100000);
  static bool is_filler(const std::string& text) { return has_line(text, "FILLER=1"); }

  static bool has_line(const std::string& text, const std::string& line);
  static std::optional<std::string> value_of(const std::string& text, const std::string& key);

 private:
  std::string address_;
  sockaddr_un addr_{};
  socklen_t addr_length_ = 0;
  int fd_ = -1;
  std::vector<int> fillers_;
  std::vector<message> seen_;
};

}  // namespace gatewayd::test
