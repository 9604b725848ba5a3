#include "tools/traffic/traffic_supplier.hpp"

#include <unistd.h>

#include <limits>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "protocol/frame_codec.hpp"
#include "tools/traffic/frame_batch.hpp"
#include "tools/traffic/sockets.hpp"

namespace gatewayd::traffic {

std::string traffic_address(unsigned consumer, unsigned supplier) {
  std::string a = "t.";
  a += std::to_string(consumer);
  a += '.';
  a += std::to_string(supplier);
  return a;
}

traffic_supplier::traffic_supplier(std::uint16_t port, options o) : o_(o), port_(port) {
  if (o_.consumers == 0 || o_.consumers > max_streams)
    throw std::invalid_argument("traffic_supplier: 1..256 consumers");
  thread_ = std::thread([this] { run(); });
}

traffic_supplier::~traffic_supplier() {
  stop();
}

void traffic_supplier::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

// A connected socket, or -1 when this supplier gives up (stopped, or a lost connection
// without `reconnect`).
int traffic_supplier::connect(bool& ever_connected) {
  while (!stop_.load()) {
    std::error_code ec;
    if (const int fd = dial(loopback(port_), ec); fd >= 0) {
      if (ever_connected) reconnects_.fetch_add(1);
      ever_connected = connected_ = true;
      return fd;
    }
    if (ever_connected && !o_.reconnect) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

void traffic_supplier::count_whole_frames(std::string_view bytes) {
  for (;;) {
    const auto r = protocol::parse_frame(bytes, std::numeric_limits<std::uint32_t>::max());
    if (r.state != protocol::parse_result::status::frame) return;
    for (unsigned c = 0; c < o_.consumers; ++c) {
      if (r.frame.address == traffic_address(c, o_.id)) sent_to_[c].fetch_add(1);
    }
    sent_.fetch_add(1);
    bytes.remove_prefix(r.frame.bytes.size());
  }
}

void traffic_supplier::run() {
  using clock = std::chrono::steady_clock;
  std::vector<std::string> addresses;
  for (unsigned c = 0; c < o_.consumers; ++c)
    addresses.push_back(traffic_address(c, o_.id));
  frame_batch batch(std::move(addresses), o_.payload_size, static_cast<std::uint16_t>(o_.id),
                    o_.batch);
  std::vector<std::uint64_t> before(o_.consumers);
  const auto start = clock::now();
  clock::time_point lost{};
  bool ever_connected = false;
  int fd = -1;
  while (!stop_.load()) {
    if (fd < 0 && (fd = connect(ever_connected)) < 0) break;
    if (o_.rate > 0 && static_cast<double>(sent_.load()) >=
                           std::chrono::duration<double>(clock::now() - start).count() * o_.rate) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      continue;
    }
    for (unsigned c = 0; c < o_.consumers; ++c)
      before[c] = batch.stamped(c);
    const auto bytes = batch.next(batch.capacity(), monotonic_ns());
    std::error_code ec;
    std::size_t written = 0;
    if (send_all(fd, bytes, stop_, ec, &written)) {
      for (unsigned c = 0; c < o_.consumers; ++c)
        sent_to_[c].fetch_add(batch.stamped(c) - before[c]);
      sent_.fetch_add(batch.capacity());
      if (lost != clock::time_point{}) {
        const auto gap =
            std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - lost).count();
        if (gap > longest_outage_ms_.load()) longest_outage_ms_ = gap;
        lost = {};
      }
      continue;
    }
    if (ec == std::errc::operation_canceled) {
      // Stopped while the gateway was not reading (paused): the whole frames already out of
      // this write reach it when the connection closes, and count as sent; a frame cut at
      // the end never completes, and the gateway drops it.
      count_whole_frames(bytes.substr(0, written));
      break;
    }
    // The connection failed mid-batch: its numbers are used, whatever part arrived.
    ::close(fd);
    fd = -1;
    connected_ = false;
    if (lost == clock::time_point{}) lost = clock::now();
    if (!o_.reconnect) break;
  }
  if (fd >= 0) ::close(fd);
}

}  // namespace gatewayd::traffic
