// A verifying consumer endpoint on plain sockets, cheap enough for full rate: accepts the
// gateway's connections one after another and checks every frame (whole, meant for this
// consumer, in order, once) into a tally that other threads or processes read.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

namespace gatewayd::traffic {

// What one consumer saw. Plain atomics, so a tally may live in memory shared with a forked
// consumer process that a test kills.
struct consumer_tally {
  std::atomic<std::uint64_t> frames{0};
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> connections{0};
  std::atomic<std::uint64_t> corrupt{0};           // bytes that are not GWP/1
  std::atomic<std::uint64_t> partial_at_close{0};  // a connection ended inside a frame
  std::atomic<std::uint64_t> misrouted{0};         // a frame of another consumer's stream
  std::atomic<std::uint64_t> lost{0};              // sequence gaps (see traffic_counts)
  std::atomic<std::uint64_t> reordered{0};
  std::atomic<std::uint64_t> duplicated{0};
  std::atomic<std::uint64_t> late{0};
};

// Accepts connections on `listen_fd` one after another until `stop` is set, verifying every
// frame into `tally`. Frames should carry stream `me` (a traffic_supplier's consumer index);
// any other stream counts as misrouted.
void serve_traffic_consumer(int listen_fd, unsigned me, consumer_tally& tally,
                            const std::atomic<bool>& stop);

// The consumer above on its own thread, listening on 127.0.0.1:port (0 = any free port).
class traffic_consumer {
 public:
  explicit traffic_consumer(unsigned me, std::uint16_t port = 0);
  ~traffic_consumer();
  traffic_consumer(const traffic_consumer&) = delete;
  traffic_consumer& operator=(const traffic_consumer&) = delete;

  std::uint16_t port() const noexcept { return port_; }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }
  const consumer_tally& tally() const noexcept { return tally_; }

 private:
  consumer_tally tally_;
  std::atomic<bool> stop_{false};
  int fd_;
  std::uint16_t port_;
  std::thread thread_;
};

}  // namespace gatewayd::traffic
