// A supplier thread sending numbered frames to a gateway: frames for consumers 0..k-1 in
// turn (mixed addresses), paced or at full speed, optionally redialling a lost connection.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>

#include "tools/traffic/payload_header.hpp"

namespace gatewayd::traffic {

// The address of consumer k's frames from supplier `id`: "t.<k>.<id>" (route "t.<k>.>").
std::string traffic_address(unsigned consumer, unsigned supplier);

class traffic_supplier {
 public:
  struct options {
    unsigned id = 0;         // the sender id in every header, and the last address token
    unsigned consumers = 1;  // frame i goes to consumer i mod consumers (stream i mod consumers)
    std::size_t payload_size = 64;
    std::size_t batch = 32;  // frames per write
    double rate = 0;         // frames/s; 0 = as fast as it can
    bool reconnect = false;  // redial a lost connection every 20 ms and go on
  };
  // Dials 127.0.0.1:port from its own thread (retrying until the first connection).
  traffic_supplier(std::uint16_t port, options o);
  ~traffic_supplier();  // stops and joins
  traffic_supplier(const traffic_supplier&) = delete;
  traffic_supplier& operator=(const traffic_supplier&) = delete;

  void stop();
  // Frames written whole, including those of a write that stop() cut short.
  std::uint64_t sent() const noexcept { return sent_.load(); }
  // Frames for consumer c that were written whole. A write that failed used its numbers all
  // the same: the consumer sees them as a gap.
  std::uint64_t sent_to(unsigned c) const noexcept { return sent_to_[c].load(); }
  std::uint64_t reconnects() const noexcept { return reconnects_.load(); }
  // The longest time without a successful send after a disconnect (the outage as seen here).
  std::chrono::milliseconds longest_outage() const noexcept {
    return std::chrono::milliseconds(longest_outage_ms_.load());
  }
  bool connected() const noexcept { return connected_.load(); }

 private:
  void run();
  int connect(bool& ever_connected);
  // Counts the whole frames at the front of `bytes` (a write cut short) as sent.
  void count_whole_frames(std::string_view bytes);

  options o_;
  std::uint16_t port_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> connected_{false};
  std::atomic<std::uint64_t> sent_{0};
  std::array<std::atomic<std::uint64_t>, max_streams> sent_to_{};
  std::atomic<std::uint64_t> reconnects_{0};
  std::atomic<std::int64_t> longest_outage_ms_{0};
  std::thread thread_;
};

}  // namespace gatewayd::traffic
