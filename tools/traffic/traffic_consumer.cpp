#include "tools/traffic/traffic_consumer.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

#include "tools/traffic/connection_reader.hpp"
#include "tools/traffic/sockets.hpp"

namespace gatewayd::traffic {
namespace {

void publish(const verifier& v, consumer_tally& t) {
  const auto& c = v.counts();
  t.frames.store(c.frames, std::memory_order_relaxed);
  t.corrupt.store(c.corrupt, std::memory_order_relaxed);
  t.lost.store(c.lost, std::memory_order_relaxed);
  t.reordered.store(c.reordered, std::memory_order_relaxed);
  t.duplicated.store(c.duplicated, std::memory_order_relaxed);
  t.late.store(c.late, std::memory_order_relaxed);
}

// Reads one connection to its end (or to a corrupt frame, after which nothing can be trusted).
void serve_connection(int fd, unsigned me, verifier& v, consumer_tally& t,
                      const std::atomic<bool>& stop) {
  connection_reader reader(v, 0);
  auto on_frame = [&](const protocol::frame_view& f, const std::optional<payload_header>& h) {
    t.bytes.fetch_add(f.bytes.size(), std::memory_order_relaxed);
    if (!h || h->stream != me) t.misrouted.fetch_add(1, std::memory_order_relaxed);
  };
  std::error_code ec;
  while (!stop.load(std::memory_order_relaxed)) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const auto state = reader.read_some(fd, monotonic_ns(), on_frame, ec);
    publish(v, t);
    if (state == connection_reader::state::open) continue;
    if (state == connection_reader::state::closed && reader.has_partial())
      t.partial_at_close.fetch_add(1, std::memory_order_relaxed);
    break;
  }
  ::close(fd);
}

}  // namespace

void serve_traffic_consumer(int listen_fd, unsigned me, consumer_tally& tally,
                            const std::atomic<bool>& stop) {
  // One verifier for every connection: a reconnect continues the streams, so what a cut
  // loses shows as a gap.
  verifier v;
  while (!stop.load(std::memory_order_relaxed)) {
    pollfd p{listen_fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    tally.connections.fetch_add(1, std::memory_order_relaxed);
    serve_connection(fd, me, v, tally, stop);
  }
}

namespace {
int listen_or_throw(std::uint16_t port) {
  std::error_code ec;
  const int fd = listen_on(loopback(port), ec, 64);
  if (fd < 0)
    throw std::runtime_error("cannot listen on 127.0.0.1:" + std::to_string(port) + ": " +
                             ec.message());
  return fd;
}
}  // namespace

traffic_consumer::traffic_consumer(unsigned me, std::uint16_t port)
    : fd_(listen_or_throw(port)),
      port_(local_port(fd_)),
      thread_([this, me] { serve_traffic_consumer(fd_, me, tally_, stop_); }) {}

traffic_consumer::~traffic_consumer() {
  stop_ = true;
  thread_.join();
  ::close(fd_);
}

}  // namespace gatewayd::traffic
