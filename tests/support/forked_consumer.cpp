#include "tests/support/forked_consumer.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "protocol/control_message.hpp"
#include "protocol/frame_codec.hpp"
#include "tools/traffic/payload_header.hpp"
#include "tools/traffic/sockets.hpp"

namespace gatewayd::test {

shared_tally::shared_tally() {
  void* mem = ::mmap(nullptr, sizeof(traffic::consumer_tally), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) throw std::runtime_error("mmap failed");
  tally_ = new (mem) traffic::consumer_tally();
}

shared_tally::~shared_tally() {
  tally_->~consumer_tally();
  ::munmap(tally_, sizeof(traffic::consumer_tally));
}

pid_t fork_traffic_consumer(std::uint16_t port, unsigned me, traffic::consumer_tally& tally) {
  std::error_code ec;
  const int fd = traffic::listen_on(traffic::loopback(port), ec, 64);
  if (fd < 0) throw std::runtime_error("cannot listen on port " + std::to_string(port));
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    // Hold no copy of the test's other sockets: their peers must see them close.
    if (fd > 3) ::close_range(3, static_cast<unsigned>(fd) - 1, 0);
    ::close_range(static_cast<unsigned>(fd) + 1, ~0u, 0);
    static std::atomic<bool> never{false};
    traffic::serve_traffic_consumer(fd, me, tally, never);
    ::_exit(0);
  }
  ::close(fd);
  return pid;
}

void kill_consumer_process(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

// What a forked_ack_member shares with the test: written by the child only.
struct forked_ack_member::record {
  static constexpr std::size_t capacity = std::size_t{1} << 17;
  std::atomic<std::uint64_t> frames{0};  // sequences recorded (each published before counted)
  std::atomic<std::uint64_t> corrupt{0};
  std::atomic<bool> stalled{false};
  std::atomic<bool> overflowed{false};
  std::uint64_t sequence[capacity];
};

namespace {

// The child: accepts every connection, reads whole frames off each (until the stall), records
// their sequences and answers each read that completed frames with `ack N` (N = that
// connection's frames so far), as an `ack = true` consumer does. Never returns: it is killed.
[[noreturn]] void serve_ack_member(int listen_fd, std::uint64_t stall_after, auto& r) {
  struct connection {
    int fd;
    std::string buffer;
    std::uint64_t frames = 0;
  };
  std::vector<connection> connections;
  std::vector<char> chunk(256 * 1024);
  std::vector<pollfd> fds;
  for (;;) {
    fds.assign(1, pollfd{listen_fd, POLLIN, 0});
    if (!r.stalled.load())
      for (const auto& c : connections)
        fds.push_back({c.fd, POLLIN, 0});
    ::poll(fds.data(), fds.size(), 100);
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      auto& c = connections[i - 1];
      const ssize_t n = ::read(c.fd, chunk.data(), chunk.size());
      if (n <= 0) {
        ::close(c.fd);
        c.fd = -1;
        continue;
      }
      c.buffer.append(chunk.data(), static_cast<std::size_t>(n));
      std::size_t pos = 0;
      std::uint64_t got = 0;
      for (;;) {
        const auto p = protocol::parse_frame(std::string_view(c.buffer).substr(pos), ~0u);
        if (p.state == protocol::parse_result::status::need_more) break;
        const auto header = p.state == protocol::parse_result::status::frame
                                ? traffic::read_header(p.frame.payload)
                                : std::nullopt;
        if (!header) {
          ++r.corrupt;
          ::close(c.fd);
          c.fd = -1;
          break;
        }
        const std::uint64_t at = r.frames.load();
        if (at < r.capacity) {
          r.sequence[at] = header->sequence;
          r.frames.store(at + 1);
        } else {
          r.overflowed = true;
        }
        pos += p.frame.bytes.size();
        ++got;
      }
      if (c.fd < 0 || got == 0) continue;
      c.buffer.erase(0, pos);
      c.frames += got;
      char ack[protocol::max_control_size];
      const std::size_t len =
          protocol::encode_control({protocol::control_message::kind::ack, c.frames}, ack);
      for (std::size_t out = 0; out < len;) {
        const ssize_t w = ::send(c.fd, ack + out, len - out, MSG_NOSIGNAL);
        if (w <= 0) break;
        out += static_cast<std::size_t>(w);
      }
    }
    std::erase_if(connections, [](const connection& c) { return c.fd < 0; });
    if (stall_after != 0 && r.frames.load() >= stall_after) r.stalled = true;
    if (fds[0].revents & POLLIN) {
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) connections.push_back({fd, {}, 0});
    }
  }
}

}  // namespace

forked_ack_member::forked_ack_member(std::uint64_t stall_after) {
  void* mem =
      ::mmap(nullptr, sizeof(record), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) throw std::runtime_error("mmap failed");
  record_ = new (mem) record();
  std::error_code ec;
  const int fd = traffic::listen_on(traffic::loopback(0), ec, 64);
  if (fd < 0) throw std::runtime_error("cannot listen: " + ec.message());
  port_ = traffic::local_port(fd);
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    // Dies with the test; holds no copy of the test's other sockets (their peers must see
    // them close).
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    if (fd > 3) ::close_range(3, static_cast<unsigned>(fd) - 1, 0);
    ::close_range(static_cast<unsigned>(fd) + 1, ~0u, 0);
    serve_ack_member(fd, stall_after, *record_);
  }
  ::close(fd);
}

forked_ack_member::~forked_ack_member() {
  kill();
  record_->~record();
  ::munmap(record_, sizeof(record));
}

bool forked_ack_member::stalled() const noexcept {
  return record_->stalled.load();
}

std::vector<std::uint64_t> forked_ack_member::sequences() const {
  const std::uint64_t n = record_->frames.load();
  return {record_->sequence, record_->sequence + n};
}

std::uint64_t forked_ack_member::corruptions() const noexcept {
  return record_->corrupt.load();
}

bool forked_ack_member::overflowed() const noexcept {
  return record_->overflowed.load();
}

void forked_ack_member::kill() {
  if (pid_ <= 0) return;
  kill_consumer_process(pid_);
  pid_ = -1;
}

}  // namespace gatewayd::test
