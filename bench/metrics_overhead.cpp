// End-to-end throughput of a running gatewayd, one supplier -> one consumer, for comparing
// [metrics] enabled = true against false. It starts no gateway: it listens where the
// gateway's consumer dials, connects to the supplier port, sends pre-encoded frames as fast
// as one thread can write, counts whole frames received in another, and (with --scrape)
// fetches /metrics every second meanwhile. Driven by bench/metrics_overhead.sh.
//
//   metrics_overhead --supplier-port P --consumer-port C [--payload 128] [--seconds 5]
//                    [--warmup 1] [--scrape METRICS_PORT] [--gateway-pid PID]
// With --gateway-pid it also prints the gateway's CPU time per frame delivered, which a
// machine shared with other work disturbs far less than the rate.
#include <unistd.h>
#include <algorithm>
#include <array>
#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "protocol/frame_codec.hpp"

namespace {

using asio::ip::tcp;
using clock_type = std::chrono::steady_clock;

struct options {
  unsigned short supplier_port = 0, consumer_port = 0, scrape_port = 0;
  long gateway_pid = 0;
  std::size_t payload = 128;
  double seconds = 5, warmup = 1;
};

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--supplier-port")
      o.supplier_port = static_cast<unsigned short>(std::atoi(v));
    else if (k == "--consumer-port")
      o.consumer_port = static_cast<unsigned short>(std::atoi(v));
    else if (k == "--scrape")
      o.scrape_port = static_cast<unsigned short>(std::atoi(v));
    else if (k == "--gateway-pid")
      o.gateway_pid = std::atol(v);
    else if (k == "--payload")
      o.payload = static_cast<std::size_t>(std::atol(v));
    else if (k == "--seconds")
      o.seconds = std::atof(v);
    else if (k == "--warmup")
      o.warmup = std::atof(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  if (!o.supplier_port || !o.consumer_port) {
    std::fprintf(stderr,
                 "usage: metrics_overhead --supplier-port P --consumer-port C "
                 "[--payload N] [--seconds S] [--warmup S] [--scrape METRICS_PORT]\n");
    std::exit(2);
  }
  return o;
}

// Counts whole GWP/1 frames in a byte stream without keeping them (header: 10 bytes, with the
// address length at 4..5 and the payload length at 6..9, big-endian).
class frame_counter {
 public:
  void feed(const unsigned char* p, std::size_t n) {
    while (n) {
      if (skip_) {
        const std::size_t k = std::min<std::size_t>(skip_, n);
        skip_ -= k, p += k, n -= k;
        if (!skip_) frames.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      const std::size_t k = std::min(n, header_.size() - have_);
      std::memcpy(header_.data() + have_, p, k);
      have_ += k, p += k, n -= k;
      if (have_ < header_.size()) continue;
      have_ = 0;
      const auto& h = header_;
      skip_ = (std::size_t(h[4]) << 8 | h[5]) +
              (std::size_t(h[6]) << 24 | std::size_t(h[7]) << 16 | std::size_t(h[8]) << 8 | h[9]);
      if (!skip_) frames.fetch_add(1, std::memory_order_relaxed);
    }
  }
  std::atomic<std::uint64_t> frames{0};

 private:
  std::array<unsigned char, 10> header_{};
  std::size_t have_ = 0, skip_ = 0;
};

// user + system CPU seconds of a process so far (0 if it cannot be read).
double cpu_seconds(long pid) {
  if (!pid) return 0;
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (!f) return 0;
  char buf[1024] = {};
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  const char* p = std::strrchr(buf, ')');
  if (!p || n == 0) return 0;
  unsigned long utime = 0, stime = 0;
  // After ") ": state, then fields 4..13, then utime (14) and stime (15).
  if (std::sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) !=
      2)
    return 0;
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  asio::io_context ioc;
  const auto loopback = asio::ip::address_v4::loopback();
  tcp::acceptor acceptor(ioc, {loopback, o.consumer_port});
  tcp::socket consumer(ioc);
  acceptor.accept(consumer);  // the gateway dials us

  tcp::socket supplier(ioc);
  supplier.connect({loopback, o.supplier_port});
  supplier.set_option(tcp::no_delay(true));
  // 64 KiB of whole frames per write: the supplier side is never the bottleneck.
  const std::string frame =
      gatewayd::protocol::encode_frame("bench.metrics", std::string(o.payload, 'x'));
  std::string block;
  while (block.size() + frame.size() <= 65536)
    block += frame;
  const std::uint64_t frames_per_block = block.size() / frame.size();

  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> sent{0};
  frame_counter received;
  std::thread reader([&] {
    std::vector<unsigned char> buf(1 << 20);
    std::error_code ec;
    while (!stop.load(std::memory_order_relaxed)) {
      const std::size_t n = consumer.read_some(asio::buffer(buf), ec);
      if (ec) break;
      received.feed(buf.data(), n);
    }
  });
  std::thread writer([&] {
    std::error_code ec;
    while (!stop.load(std::memory_order_relaxed)) {
      asio::write(supplier, asio::buffer(block), ec);
      if (ec) break;
      sent.fetch_add(frames_per_block, std::memory_order_relaxed);
    }
  });
  std::atomic<std::uint64_t> scrapes{0}, scrape_failures{0};
  std::thread scraper([&] {
    if (!o.scrape_port) return;
    const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    auto next = clock_type::now();
    while (!stop.load(std::memory_order_relaxed)) {
      std::error_code ec;
      asio::io_context sioc;
      tcp::socket s(sioc);
      s.connect({loopback, o.scrape_port}, ec);
      if (!ec) asio::write(s, asio::buffer(request), ec);
      std::string reply;
      std::array<char, 65536> buf{};
      while (!ec) {
        const std::size_t n = s.read_some(asio::buffer(buf), ec);
        reply.append(buf.data(), n);
      }
      (reply.rfind("HTTP/1.1 200", 0) == 0 || reply.rfind("HTTP/1.0 200", 0) == 0 ? scrapes
                                                                                  : scrape_failures)
          .fetch_add(1);
      next += std::chrono::seconds(1);
      while (clock_type::now() < next && !stop.load(std::memory_order_relaxed))
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });

  std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup));
  const auto t0 = clock_type::now();
  const std::uint64_t r0 = received.frames.load(), s0 = sent.load();
  const double cpu0 = cpu_seconds(o.gateway_pid);
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  const auto t1 = clock_type::now();
  const std::uint64_t r1 = received.frames.load(), s1 = sent.load();
  const double cpu1 = cpu_seconds(o.gateway_pid);
  const double secs = std::chrono::duration<double>(t1 - t0).count();

  stop = true;
  std::error_code ignored;
  supplier.shutdown(tcp::socket::shutdown_both, ignored);
  supplier.close(ignored);
  consumer.shutdown(tcp::socket::shutdown_both, ignored);
  consumer.close(ignored);
  writer.join();
  reader.join();
  scraper.join();

  std::printf(
      "payload=%zu seconds=%.2f sent_frames_per_s=%.0f received_frames_per_s=%.0f "
      "gateway_cpu_ns_per_frame=%.1f scrapes=%llu scrape_failures=%llu\n",
      o.payload, secs, double(s1 - s0) / secs, double(r1 - r0) / secs,
      r1 > r0 ? (cpu1 - cpu0) * 1e9 / double(r1 - r0) : 0.0,
      static_cast<unsigned long long>(scrapes.load()),
      static_cast<unsigned long long>(scrape_failures.load()));
  return scrape_failures.load() ? 1 : 0;
}
