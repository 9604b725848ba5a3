#include "tests/support/forked_consumer.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <new>
#include <stdexcept>
#include <string>

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

}  // namespace gatewayd::test
