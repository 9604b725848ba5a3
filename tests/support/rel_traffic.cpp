#include "tests/support/rel_traffic.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <new>
#include <stdexcept>

#include "protocol/frame_codec.hpp"

namespace gatewayd::test {

namespace {

constexpr char hex_digits[] = "0123456789abcdef";

void put_be(std::string& out, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i)
    out += static_cast<char>((v >> (8 * i)) & 0xff);
}

std::uint64_t get_be(const char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

int hex_value(char c) {
  for (int i = 0; i < 16; ++i)
    if (hex_digits[i] == c) return i;
  return -1;
}

sockaddr_in loopback(unsigned short port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return sa;
}

void verify_frame(const protocol::frame_view& f, unsigned me, consumer_tally& t) {
  t.frames.fetch_add(1, std::memory_order_relaxed);
  t.bytes.fetch_add(f.bytes.size(), std::memory_order_relaxed);
  const auto a = f.address;
  if (a.size() != 5 || a[0] != 't' || a[1] != '.' || a[3] != '.' ||
      hex_value(a[2]) != static_cast<int>(me)) {
    t.misrouted.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const int addressed_supplier = hex_value(a[4]);
  if (f.payload.size() < 12 || addressed_supplier < 0 ||
      get_be(f.payload.data(), 4) != static_cast<std::uint64_t>(addressed_supplier)) {
    t.corrupt.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const auto seq = static_cast<std::int64_t>(get_be(f.payload.data() + 4, 8));
  auto& last = t.last_seq[static_cast<std::size_t>(addressed_supplier)];
  const std::int64_t prev = last.load(std::memory_order_relaxed);
  if (seq <= prev) {
    t.duplicates.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (seq > prev + 1) t.gaps.fetch_add(static_cast<std::uint64_t>(seq - prev - 1));
  last.store(seq, std::memory_order_relaxed);
}

// Reads one connection to its end, verifying every frame.
void serve_connection(int fd, unsigned me, consumer_tally& t, const std::atomic<bool>& stop) {
  static constexpr std::size_t buffer_size = 1 << 18;
  char buf[buffer_size];
  std::size_t used = 0;
  bool broken = false;
  while (!stop.load(std::memory_order_relaxed)) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = ::recv(fd, buf + used, buffer_size - used, 0);
    if (n <= 0) break;
    if (broken) continue;
    used += static_cast<std::size_t>(n);
    std::size_t pos = 0;
    while (pos < used) {
      const auto r = protocol::parse_frame({buf + pos, used - pos}, buffer_size / 2);
      if (r.state == protocol::parse_result::status::need_more) break;
      if (r.state == protocol::parse_result::status::error) {
        t.corrupt.fetch_add(1, std::memory_order_relaxed);
        broken = true;  // nothing after a bad byte can be trusted; read on to the end
        break;
      }
      verify_frame(r.frame, me, t);
      pos += r.frame.bytes.size();
    }
    std::memmove(buf, buf + pos, used - pos);
    used -= pos;
  }
  if (used > 0 && !broken) t.partial_at_close.fetch_add(1, std::memory_order_relaxed);
  ::close(fd);
}

}  // namespace

std::string traffic_address(unsigned consumer, unsigned supplier) {
  std::string a = "t.";
  a += hex_digits[consumer % 16];
  a += '.';
  a += hex_digits[supplier % 16];
  return a;
}

void append_traffic_frame(std::string& out, unsigned consumer, unsigned supplier, std::uint64_t seq,
                          std::size_t payload_size) {
  std::string payload;
  payload.reserve(std::max<std::size_t>(payload_size, 12));
  put_be(payload, supplier, 4);
  put_be(payload, seq, 8);
  payload.resize(std::max<std::size_t>(payload_size, 12), static_cast<char>('a' + seq % 26));
  protocol::append_frame(out, traffic_address(consumer, supplier), payload);
}

shared_tally::shared_tally() {
  void* mem = ::mmap(nullptr, sizeof(consumer_tally), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) throw std::runtime_error("mmap failed");
  tally_ = new (mem) consumer_tally();
}

shared_tally::~shared_tally() {
  tally_->~consumer_tally();
  ::munmap(tally_, sizeof(consumer_tally));
}

int listen_loopback(unsigned short port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const sockaddr_in sa = loopback(port);
  if (fd < 0 || ::bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0 ||
      ::listen(fd, 64) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("cannot listen on 127.0.0.1:" + std::to_string(port) + ": " + why);
  }
  return fd;
}

unsigned short local_port(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  return ntohs(sa.sin_port);
}

void serve_traffic_consumer(int listen_fd, unsigned me, consumer_tally& tally,
                            const std::atomic<bool>& stop) {
  while (!stop.load(std::memory_order_relaxed)) {
    pollfd p{listen_fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    tally.connections.fetch_add(1, std::memory_order_relaxed);
    serve_connection(fd, me, tally, stop);
  }
}

traffic_consumer::traffic_consumer(unsigned me, unsigned short port)
    : fd_(listen_loopback(port)),
      port_(local_port(fd_)),
      thread_([this, me] { serve_traffic_consumer(fd_, me, tally_, stop_); }) {}

traffic_consumer::~traffic_consumer() {
  stop_ = true;
  thread_.join();
  ::close(fd_);
}

pid_t fork_traffic_consumer(unsigned short port, unsigned me, consumer_tally& tally) {
  const int fd = listen_loopback(port);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    // Hold no copy of the test's other sockets: their peers must see them close.
    if (fd > 3) ::close_range(3, static_cast<unsigned>(fd) - 1, 0);
    ::close_range(static_cast<unsigned>(fd) + 1, ~0u, 0);
    static std::atomic<bool> never{false};
    serve_traffic_consumer(fd, me, tally, never);
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

traffic_supplier::traffic_supplier(unsigned short port, options o)
    : o_(o), port_(port), thread_([this] { run(); }) {}

traffic_supplier::~traffic_supplier() {
  stop();
}

void traffic_supplier::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void traffic_supplier::run() {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  std::string batch;
  int fd = -1;
  clock::time_point lost{};
  bool ever_connected = false;
  std::array<std::uint64_t, max_traffic_suppliers> pending{};
  while (!stop_.load()) {
    if (fd < 0) {
      fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      const sockaddr_in sa = loopback(port_.load());
      if (::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
        ::close(fd);
        fd = -1;
        if (!o_.reconnect && ever_connected) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      if (ever_connected) reconnects_.fetch_add(1);
      ever_connected = true;
      connected_ = true;
    }
    if (o_.rate > 0) {
      const double due = std::chrono::duration<double>(clock::now() - start).count() * o_.rate;
      if (static_cast<double>(sent_.load()) >= due) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        continue;
      }
    }
    batch.clear();
    pending.fill(0);
    for (std::size_t i = 0; i < o_.batch; ++i) {
      const unsigned c = static_cast<unsigned>((sent_.load() + i) % o_.consumers);
      append_traffic_frame(batch, c, o_.id, next_seq_[c].load() + pending[c], o_.payload_size);
      ++pending[c];
    }
    for (unsigned c = 0; c < o_.consumers; ++c)
      next_seq_[c].fetch_add(pending[c]);
    std::size_t off = 0;
    while (off < batch.size() && !stop_.load()) {
      const ssize_t n = ::send(fd, batch.data() + off, batch.size() - off, MSG_NOSIGNAL);
      if (n <= 0) break;
      off += static_cast<std::size_t>(n);
    }
    if (off == batch.size()) {
      for (unsigned c = 0; c < o_.consumers; ++c)
        sent_to_[c].fetch_add(pending[c]);
      sent_.fetch_add(o_.batch);
      if (lost != clock::time_point{}) {
        const auto gap =
            std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - lost).count();
        if (gap > longest_outage_ms_.load()) longest_outage_ms_ = gap;
        lost = {};
      }
      continue;
    }
    if (stop_.load()) break;
    // The connection failed mid-batch: its numbers are skipped, whatever part arrived.
    ::close(fd);
    fd = -1;
    connected_ = false;
    if (lost == clock::time_point{}) lost = clock::now();
    if (!o_.reconnect) return;
  }
  if (fd >= 0) ::close(fd);
}

}  // namespace gatewayd::test
