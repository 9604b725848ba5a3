#include "tools/gateway_peer/sender.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "tools/gateway_peer/stop_signal.hpp"
#include "tools/traffic/frame_batch.hpp"
#include "tools/traffic/payload_header.hpp"
#include "tools/traffic/sockets.hpp"

namespace gatewayd::tools {
namespace {

struct connection_result {
  std::uint64_t frames = 0;
  std::uint64_t bytes = 0;
  std::uint64_t reconnects = 0;
  std::string error;  // empty when it ended normally
};

void sleep_ns(std::uint64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000u), static_cast<long>(ns % 1'000'000'000u)};
  clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, nullptr);
}

std::uint16_t sender_id(unsigned index) {
  return static_cast<std::uint16_t>((static_cast<unsigned>(::getpid()) * 2654435761u) >> 16) ^
         static_cast<std::uint16_t>(index * 40503u);
}

class connection_sender {
 public:
  connection_sender(const send_options& o, unsigned index, std::uint64_t count, double rate,
                    std::uint64_t deadline_ns)
      : o_(o),
        count_(count),
        rate_(rate),
        deadline_ns_(deadline_ns),
        batch_(o.addresses, o.size, sender_id(index)) {}

  connection_result run(int fd) {
    connection_result r;
    const std::uint64_t start = traffic::monotonic_ns();
    std::uint64_t next = 0;  // frames stamped on this connection
    while (!stop_requested().load()) {
      if (count_ != 0 && next >= count_) break;
      std::uint64_t now = traffic::monotonic_ns();
      if (deadline_ns_ != 0 && now >= deadline_ns_) break;
      std::size_t n = batch_.capacity();
      if (count_ != 0) n = static_cast<std::size_t>(std::min<std::uint64_t>(n, count_ - next));
      if (rate_ > 0) {
        // Token bucket: frames allowed so far minus frames sent, at most one batch at a time.
        const double allowed = rate_ * static_cast<double>(now - start) / 1e9 + 1.0;
        const double tokens = allowed - static_cast<double>(next);
        if (tokens < 1.0) {
          const auto wait = static_cast<std::uint64_t>((1.0 - tokens) / rate_ * 1e9);
          sleep_ns(std::clamp<std::uint64_t>(wait, 1'000, 1'000'000));
          continue;
        }
        n = std::min<std::size_t>(n, static_cast<std::size_t>(tokens));
        now = traffic::monotonic_ns();
      }
      const auto bytes = batch_.next(n, now);
      std::error_code ec;
      if (!traffic::send_all(fd, bytes, stop_requested(), ec)) {
        if (ec == std::errc::operation_canceled) break;
        ::close(fd);
        if (!o_.reconnect) {
          r.error = "connection lost: " + ec.message();
          return r;
        }
        // Frames of the failed write may or may not have arrived: the receiver counts them.
        if ((fd = redial()) < 0) return r;
        ++r.reconnects;
      }
      next += n;
      r.frames += n;
      r.bytes += bytes.size();
    }
    ::close(fd);
    return r;
  }

 private:
  int redial() const {
    while (!stop_requested().load() &&
           (deadline_ns_ == 0 || traffic::monotonic_ns() < deadline_ns_)) {
      sleep_ns(100'000'000);
      std::error_code ec;
      if (const int fd = traffic::dial(o_.to, ec); fd >= 0) return fd;
    }
    return -1;
  }

  const send_options& o_;
  std::uint64_t count_;
  double rate_;
  std::uint64_t deadline_ns_;
  traffic::frame_batch batch_;
};

}  // namespace

int run_sender(const send_options& o) {
  install_stop_handlers();
  const unsigned k = o.connections;
  // Dial everything first: an unreachable gateway is reported before anything is sent.
  std::vector<int> fds;
  for (unsigned i = 0; i < k; ++i) {
    std::error_code ec;
    const int fd = traffic::dial(o.to, ec);
    if (fd < 0) {
      std::fprintf(stderr, "gateway-peer send: cannot connect to %s: %s\n",
                   o.to.to_string().c_str(), ec.message().c_str());
      for (int f : fds)
        ::close(f);
      return exit_runtime_error;
    }
    fds.push_back(fd);
  }
  const std::uint64_t start = traffic::monotonic_ns();
  const std::uint64_t deadline =
      o.duration > 0 ? start + static_cast<std::uint64_t>(o.duration * 1e9) : 0;
  std::vector<connection_result> results(k);
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < k; ++i) {
    const std::uint64_t count = o.count == 0 ? 0 : o.count / k + (i < o.count % k ? 1 : 0);
    threads.emplace_back([&, i, count] {
      connection_sender s(o, i, count, o.rate / k, deadline);
      results[i] = s.run(fds[i]);
    });
  }
  for (auto& t : threads)
    t.join();
  const double seconds = static_cast<double>(traffic::monotonic_ns() - start) / 1e9;
  connection_result total;
  for (const auto& r : results) {
    total.frames += r.frames;
    total.bytes += r.bytes;
    total.reconnects += r.reconnects;
    if (total.error.empty()) total.error = r.error;
  }
  const double fps = seconds > 0 ? static_cast<double>(total.frames) / seconds : 0;
  const double mbps = seconds > 0 ? static_cast<double>(total.bytes) / seconds / 1e6 : 0;
  if (o.json) {
    std::printf(
        "{\"frames\": %llu, \"bytes\": %llu, \"seconds\": %.6f, \"frames_per_s\": %.1f, "
        "\"mb_per_s\": %.3f, \"connections\": %u, \"reconnects\": %llu, \"error\": \"%s\"}\n",
        static_cast<unsigned long long>(total.frames), static_cast<unsigned long long>(total.bytes),
        seconds, fps, mbps, k, static_cast<unsigned long long>(total.reconnects),
        total.error.c_str());
  } else {
    std::printf(
        "sent %llu frames (%llu bytes) on %u connection(s) in %.2f s: %.0f frames/s, "
        "%.1f MB/s\n",
        static_cast<unsigned long long>(total.frames), static_cast<unsigned long long>(total.bytes),
        k, seconds, fps, mbps);
  }
  if (!total.error.empty()) {
    std::fprintf(stderr, "gateway-peer send: %s: %s\n", o.to.to_string().c_str(),
                 total.error.c_str());
    return exit_runtime_error;
  }
  return exit_ok;
}

}  // namespace gatewayd::tools
