// The datagram socket through which the daemon talks to systemd (sd_notify(3), "notify
// socket"): one message per datagram, sent without ever waiting for the reader.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <string>
#include <string_view>

namespace gatewayd::gateway {

class notify_socket {
 public:
  enum class outcome : unsigned char {
    sent,
    full,    // the reader's queue is full (EAGAIN): try again later
    failed,  // anything else (no reader at that address, ...): `error` says what
  };
  struct result {
    outcome what = outcome::failed;
    int error = 0;  // errno when failed
  };

  // Not open: nobody to talk to (NOTIFY_SOCKET unset).
  notify_socket() = default;
  // `address` as NOTIFY_SOCKET gives it: an absolute path, or '@' then a name in the abstract
  // namespace; empty = not open. One that cannot be used leaves it closed, problem() says why.
  explicit notify_socket(std::string_view address);
  ~notify_socket();
  notify_socket(const notify_socket&) = delete;
  notify_socket& operator=(const notify_socket&) = delete;

  bool is_open() const noexcept { return fd_ >= 0; }
  const std::string& problem() const noexcept { return problem_; }

  // One datagram, never blocking (MSG_DONTWAIT): the reader is PID 1, which may be busy for
  // seconds, and a pool thread must not wait for it. The kernel attaches our credentials
  // itself, since systemd's socket asks for them (SO_PASSCRED).
  result send(std::string_view message) const noexcept;

 private:
  int fd_ = -1;
  sockaddr_un address_{};
  socklen_t address_length_ = 0;
  std::string problem_;
};

}  // namespace gatewayd::gateway
