// max_queued_bytes must bound the memory queues hold (issue 42, item 6). Many drop-oldest
// consumers read by one process, one supplier fanning small frames out to all of them as fast
// as it can: after a burst, with every queue drained, RSS stayed hundreds of MiB above idle;
// with the consumers stalled at different moments and their queues full, RSS grew by up to
// 3.9x what gatewayd_queued_bytes showed. The real daemon, real loopback sockets, RSS from
// /proc and the gauge from the real /metrics.
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "protocol/frame_codec.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/raw_suppliers.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"

using namespace gatewayd::test;
using namespace std::chrono_literals;

namespace {

// Consumer endpoints served by one thread (one process reading them all, as in the report):
// each accepts the gateway's connection and reads and discards what it sends, unless stalled.
// Small receive buffers, so a stalled one backs up into its queue at once.
class consumer_pool {
 public:
  explicit consumer_pool(std::size_t n) : ends_(n) {
    for (auto& e : ends_) {
      e.listener = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      const int rcvbuf = 16 * 1024;
      ::setsockopt(e.listener, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t len = sizeof a;
      if (::bind(e.listener, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
          ::listen(e.listener, 4) != 0 ||
          ::getsockname(e.listener, reinterpret_cast<sockaddr*>(&a), &len) != 0)
        BOOST_FAIL("cannot listen on 127.0.0.1");
      e.port = ntohs(a.sin_port);
    }
    thread_ = std::thread([this] { run(); });
  }
  ~consumer_pool() {
    stop_ = true;
    thread_.join();
    for (auto& e : ends_) {
      ::close(e.listener);
      if (e.conn >= 0) ::close(e.conn);
    }
  }
  consumer_pool(const consumer_pool&) = delete;
  consumer_pool& operator=(const consumer_pool&) = delete;

  std::size_t size() const noexcept { return ends_.size(); }
  unsigned short port(std::size_t i) const noexcept { return ends_[i].port; }
  void stall(std::size_t i, bool on) { ends_[i].stalled = on; }
  std::size_t connected() const noexcept { return connected_.load(); }

 private:
  struct end {
    int listener = -1;
    int conn = -1;
    unsigned short port = 0;
    std::atomic<bool> stalled{false};
  };

  void run() {
    std::vector<pollfd> fds;
    std::vector<std::size_t> whose;
    std::vector<char> sink(256 * 1024);
    while (!stop_) {
      fds.clear();
      whose.clear();
      for (std::size_t i = 0; i < ends_.size(); ++i) {
        end& e = ends_[i];
        if (e.conn < 0) {
          fds.push_back({e.listener, POLLIN, 0});
        } else if (!e.stalled) {
          fds.push_back({e.conn, POLLIN, 0});
        } else {
          continue;
        }
        whose.push_back(i);
      }
      if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
      for (std::size_t k = 0; k < fds.size(); ++k) {
        if (fds[k].revents == 0) continue;
        end& e = ends_[whose[k]];
        if (e.conn < 0) {
          e.conn = ::accept4(e.listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (e.conn >= 0) ++connected_;
        } else if (::read(e.conn, sink.data(), sink.size()) == 0) {
          ::close(e.conn);  // the gateway redials; the next accept takes it
          e.conn = -1;
          --connected_;
        }
      }
    }
  }

  std::vector<end> ends_;
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> connected_{0};
  std::thread thread_;
};

// One supplier sending 141-byte frames for every consumer as fast as the gateway takes them,
// from start() until stop().
class flooding_supplier {
 public:
  explicit flooding_supplier(unsigned short port) : port_(port) {
    const std::string frame = gatewayd::protocol::encode_frame("all.x", std::string(120, 'p'));
    while (batch_.size() < 256 * 1024)
      batch_ += frame;
    frame_size_ = frame.size();
  }
  ~flooding_supplier() { stop(); }
  std::size_t frame_size() const noexcept { return frame_size_; }

  void start() {
    stop_ = false;
    thread_ = std::thread([this] {
      test_supplier s(port_);
      auto& socket = s.socket();
      socket.non_blocking(true);
      // Goes on where the last write stopped: a write cut in the middle of a frame and begun
      // again from the batch's start would send the gateway a broken frame, and it would close
      // the connection (a round that queued nothing).
      std::size_t at = 0;
      while (!stop_) {
        std::error_code ec;
        at += socket.write_some(asio::buffer(batch_.data() + at, batch_.size() - at), ec);
        if (at == batch_.size()) at = 0;
        if (ec == asio::error::would_block) {
          pollfd p{socket.native_handle(), POLLOUT, 0};
          ::poll(&p, 1, 100);
        } else if (ec) {
          break;
        }
      }
    });
  }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  unsigned short port_;
  std::string batch_;
  std::size_t frame_size_ = 0;
  std::atomic<bool> stop_{true};
  std::thread thread_;
};

// What one consumer's slots may keep, in MiB (docs/operations.md): its ring at queue_capacity
// 1,000 (24 KiB), its write batch (40 KiB) and a routing batch per pool thread (12 KiB each).
constexpr double slots_per_consumer_mib = 0.112;

std::size_t scale(const char* name, std::size_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::strtoul(v, nullptr, 10) : fallback;
}

struct fan_out {
  consumer_pool pool;
  std::unique_ptr<gateway_fixture> gw;
  long idle_kib = 0;

  explicit fan_out(std::size_t consumers) : pool((raise_fd_limit(), consumers)) {
    std::string toml;
    std::vector<std::string> names;
    for (std::size_t i = 0; i < consumers; ++i) {
      names.push_back("c" + std::to_string(i));
      toml += consumer_toml(names.back(), "127.0.0.1:" + std::to_string(pool.port(i)),
                            "queue_capacity = 1000\noverflow = \"drop-oldest\"");
    }
    // A stalled consumer's closed window must not end its connection during the test.
    gw = std::make_unique<gateway_fixture>(toml + route_toml("all.>", names),
                                           "consumer_timeout_ms = 600000\n");
    BOOST_TEST_REQUIRE(eventually([&] { return pool.connected() == consumers; }, 30s));
    BOOST_TEST_REQUIRE(eventually([&] { return queued() == 0; }, 10s),
                       "gauge " << queued() << "\n"
                                << gw->daemon->log().substr(0, 3000));
    idle_kib = gw->rss_kib();
  }

  double queued() const { return scrape_metric(gw->metrics_port, "gatewayd_queued_bytes"); }
  double chunks_mib() const {
    return scrape_metric(gw->metrics_port, "gatewayd_frame_memory_bytes") / (1 << 20);
  }
  double slots_mib() const {
    return scrape_metric(gw->metrics_port, "gatewayd_queue_slot_bytes") / (1 << 20);
  }
  // RSS above idle, in MiB.
  double grown_mib() const { return static_cast<double>(gw->rss_kib() - idle_kib) / 1024; }
  // Waits until the gauge stops moving (the queues are full and nothing is in flight).
  double settled_queued() const {
    double last = -1;
    double now = queued();
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (now != last && std::chrono::steady_clock::now() < deadline) {
      last = now;
      std::this_thread::sleep_for(300ms);  // (polls a condition: the gauge holding still)
      now = queued();
    }
    return now;
  }
};

}  // namespace

// The report's shape at a scale a test affords: bursts while everyone reads, then every
// consumer stops reading at its own moment and the queues fill; between rounds they read again.
BOOST_AUTO_TEST_CASE(queued_memory_follows_the_gauge_and_goes_back_once_drained) {
  const std::size_t consumers = scale("QUEUE_MEMORY_CONSUMERS", 300);
  const std::size_t rounds = scale("QUEUE_MEMORY_ROUNDS", 3);
  fan_out f(consumers);
  flooding_supplier supplier(f.gw->supplier_port);
  for (std::size_t round = 0; round < rounds; ++round) {
    // A burst while everyone reads.
    supplier.start();
    std::this_thread::sleep_for(1500ms);  // (the burst's length: a load, not a wait)
    // Every consumer stops at its own moment while the frames keep coming.
    for (std::size_t i = 0; i < consumers; ++i) {
      f.pool.stall((i * 7 + round) % consumers, true);
      if (i % 10 == 9) std::this_thread::sleep_for(5ms);
    }
    // The frames keep coming until the queues hold most of what they can: the kernel's socket
    // buffers may have taken a whole burst, and a round with empty queues proves nothing.
    const double full = static_cast<double>(consumers) * 1000 * supplier.frame_size();
    BOOST_TEST_REQUIRE(eventually([&] { return f.queued() >= 0.8 * full; }, 60s),
                       "round " << round << ": queued " << f.queued() << " of " << full);
    supplier.stop();
    const double gauge = f.settled_queued();
    const double grown = f.grown_mib();
    const double gauge_mib = gauge / (1 << 20);
    BOOST_TEST_MESSAGE("round " << round << ": queues full, gauge " << gauge_mib
                                << " MiB, RSS above idle " << grown << " MiB (" << grown / gauge_mib
                                << "x), chunks " << f.chunks_mib() << " MiB, slots "
                                << f.slots_mib() << " MiB");
    // The rule (docs/operations.md, Queue memory): RSS above idle within 1.25 x the queued
    // bytes plus the slots the daemon reports (a consumer's ring, write batch and routing slots,
    // 24 B a frame: 17 % of these 141-byte frames, and kept between bursts), and those slots
    // within 112 KiB a consumer. Under a loaded CI host the slots alone reached 29 MiB here,
    // 0.64 x a 45 MiB gauge: they are the rule's second term, bounded by the third check.
    const double slots = f.slots_mib();
    BOOST_TEST(grown <= 1.25 * gauge_mib * memory_slack() + slots,
               "round " << round << ": RSS grew " << grown << " MiB for a gauge of " << gauge_mib
                        << " MiB and " << slots << " MiB of slots");
    BOOST_TEST(
        slots <= slots_per_consumer_mib * static_cast<double>(consumers),
        "round " << round << ": " << slots << " MiB of slots for " << consumers << " consumers");
    // Everyone reads again: the queues drain, and what they held goes back.
    for (std::size_t i = 0; i < consumers; ++i)
      f.pool.stall(i, false);
    BOOST_TEST_REQUIRE(eventually([&] { return f.queued() == 0; }, 30s));
    // The memory goes back within a second or so of the queues draining: within 128 MiB of
    // idle for 1,000 consumers (the report's scale), less for fewer: 16 MiB the process keeps
    // whatever the count (free chunks, the allocator's top), and 112 KiB a consumer (what one
    // keeps between bursts, its ring, write batch and routing slots, is about 80 KiB here:
    // gatewayd_queue_slot_bytes). 300 consumers: 49.6 MiB; measured 26-38.
    const double drained_bound = 16.0 + slots_per_consumer_mib * static_cast<double>(consumers);
    const bool back =
        eventually([&] { return f.grown_mib() <= drained_bound * memory_slack(); }, 5s);
    BOOST_TEST_MESSAGE("round " << round << ": drained, RSS above idle " << f.grown_mib()
                                << " MiB, chunks " << f.chunks_mib() << " MiB, slots "
                                << f.slots_mib() << " MiB");
    BOOST_TEST(back, "round " << round << ": RSS stayed " << f.grown_mib()
                              << " MiB above idle (bound " << drained_bound << " MiB)");
  }
}
