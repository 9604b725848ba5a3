// Sequenced traffic for the reliability tests and the soak: suppliers that number every frame
// and consumers that verify each one (whole, routed to the right place, in order, once) with
// plain sockets, cheap enough to run at full rate. A consumer's tally may live in shared
// memory so a forked consumer process can be SIGKILLed and still be accounted for.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

namespace gatewayd::test {

inline constexpr std::size_t max_traffic_suppliers = 16;

// Frame address: "t.<consumer>.<supplier>" (one digit each, hex); payload: supplier (4 bytes),
// sequence number (8 bytes, big-endian), then filler up to the frame's payload size.
std::string traffic_address(unsigned consumer, unsigned supplier);
void append_traffic_frame(std::string& out, unsigned consumer, unsigned supplier, std::uint64_t seq,
                          std::size_t payload_size);

// What one consumer saw. Sequence numbers are per (supplier, this consumer) stream.
struct consumer_tally {
  std::atomic<std::uint64_t> frames{0};
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> connections{0};
  std::atomic<std::uint64_t> corrupt{0};           // bad bytes inside a connection's stream
  std::atomic<std::uint64_t> partial_at_close{0};  // a connection ended inside a frame
  std::atomic<std::uint64_t> misrouted{0};         // address for another consumer
  std::atomic<std::uint64_t> duplicates{0};        // a sequence number not above the last
  std::atomic<std::uint64_t> gaps{0};              // frames skipped (sum of the holes)
  std::array<std::atomic<std::int64_t>, max_traffic_suppliers> last_seq{};  // -1 = none yet

  consumer_tally() {
    for (auto& s : last_seq)
      s.store(-1);
  }
};

// Creates a tally in memory shared with processes forked later; freed by the destructor.
class shared_tally {
 public:
  shared_tally();
  ~shared_tally();
  shared_tally(const shared_tally&) = delete;
  shared_tally& operator=(const shared_tally&) = delete;
  consumer_tally& operator*() const noexcept { return *tally_; }
  consumer_tally* operator->() const noexcept { return tally_; }

 private:
  consumer_tally* tally_;
};

// A listening socket on 127.0.0.1:port (0 = any), SO_REUSEADDR; throws on failure.
int listen_loopback(unsigned short port);
unsigned short local_port(int fd);

// Accepts connections on `listen_fd` one after another and verifies every frame for
// consumer index `me` into `tally` until `stop` is set. Allocation-free after start, so it
// can also run in a process forked from a threaded test.
void serve_traffic_consumer(int listen_fd, unsigned me, consumer_tally& tally,
                            const std::atomic<bool>& stop);

// The consumer above on a thread of this process.
class traffic_consumer {
 public:
  explicit traffic_consumer(unsigned me, unsigned short port = 0);
  ~traffic_consumer();
  unsigned short port() const noexcept { return port_; }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }
  const consumer_tally& tally() const noexcept { return tally_; }

 private:
  consumer_tally tally_;
  std::atomic<bool> stop_{false};
  int fd_;
  unsigned short port_;
  std::thread thread_;
};

// The consumer above in a forked child process (ended with SIGKILL by kill_consumer_process).
// Binds 127.0.0.1:port before returning, so the gateway can dial it at once.
pid_t fork_traffic_consumer(unsigned short port, unsigned me, consumer_tally& tally);
void kill_consumer_process(pid_t pid);

// Sends sequenced frames to the gateway from one thread: supplier `id`, frames for consumers
// 0..consumers-1 in turn, in batches of `batch`, at most `rate` frames/s (0 = as fast as it
// can). With `reconnect`, a lost connection is redialled every 20 ms and sending resumes
// (frames that failed to send are not counted as sent; their numbers are skipped).
class traffic_supplier {
 public:
  struct options {
    unsigned id = 0;
    unsigned consumers = 1;
    std::size_t payload_size = 64;
    std::size_t batch = 32;
    double rate = 0;
    bool reconnect = false;
  };
  traffic_supplier(unsigned short port, options o);
  ~traffic_supplier();  // stops and joins
  void stop();
  std::uint64_t sent() const noexcept { return sent_.load(); }
  // Frames sent for consumer `c` (all numbered 0..sent-1 plus the skipped ones).
  std::uint64_t sent_to(unsigned c) const noexcept { return sent_to_[c].load(); }
  std::uint64_t next_seq(unsigned c) const noexcept { return next_seq_[c].load(); }
  std::uint64_t reconnects() const noexcept { return reconnects_.load(); }
  // The longest time without a successful send after a disconnect (the outage as seen here).
  std::chrono::milliseconds longest_outage() const noexcept {
    return std::chrono::milliseconds(longest_outage_ms_.load());
  }
  bool connected() const noexcept { return connected_.load(); }
  void set_port(unsigned short port) noexcept { port_.store(port); }

 private:
  void run();

  options o_;
  std::atomic<unsigned short> port_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> connected_{false};
  std::atomic<std::uint64_t> sent_{0};
  std::array<std::atomic<std::uint64_t>, max_traffic_suppliers> sent_to_{};
  std::array<std::atomic<std::uint64_t>, max_traffic_suppliers> next_seq_{};
  std::atomic<std::uint64_t> reconnects_{0};
  std::atomic<std::int64_t> longest_outage_ms_{0};
  std::thread thread_;
};

}  // namespace gatewayd::test
