#include "tools/gateway_peer/sender.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
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

#include "protocol/frame_codec.hpp"
#include "tools/gateway_peer/peer_header.hpp"
#include "tools/gateway_peer/stop_signal.hpp"

namespace gatewayd::tools {
namespace {

// A pre-encoded run of identical frames (about 256 KiB): one write() sends all of it.
constexpr std::size_t batch_bytes = 256 * 1024;
constexpr std::size_t max_batch_frames = 4096;

struct connection_result {
  std::uint64_t frames = 0;
  std::uint64_t bytes = 0;
  std::uint64_t reconnects = 0;
  std::string error;  // empty when it ended normally
};

// A connected, blocking TCP socket or -1 with `error` set.
int dial(const net::endpoint& to, std::string& error) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  const int family = to.is_ipv6() ? AF_INET6 : AF_INET;
  if (family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    a->sin_family = AF_INET;
    a->sin_port = htons(to.port);
    inet_pton(AF_INET, to.host.c_str(), &a->sin_addr);
    len = sizeof(sockaddr_in);
  } else {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(to.port);
    inet_pton(AF_INET6, to.host.c_str(), &a->sin6_addr);
    len = sizeof(sockaddr_in6);
  }
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    error = "cannot connect to " + to.to_string() + ": " + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  // Wake up now and then from a write the gateway does not drain, to notice SIGINT/SIGTERM.
  timeval tv{0, 200 * 1000};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

// Writes all of buf; false with `error` set when the connection failed (or we were stopped).
bool write_all(int fd, const char* buf, std::size_t n, std::string& error) {
  while (n > 0) {
    const ssize_t w = ::send(fd, buf, n, MSG_NOSIGNAL);
    if (w > 0) {
      buf += w;
      n -= static_cast<std::size_t>(w);
      continue;
    }
    if (w < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (stop_requested().load()) {
        error = "stopped";
        return false;
      }
      continue;
    }
    error = std::string("connection lost: ") + (w == 0 ? "closed" : std::strerror(errno));
    return false;
  }
  return true;
}

void sleep_ns(std::uint64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000u), static_cast<long>(ns % 1'000'000'000u)};
  clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, nullptr);
}

class connection_sender {
 public:
  connection_sender(const send_options& o, unsigned index, std::uint64_t count, double rate,
                    std::uint64_t deadline_ns)
      : o_(o), count_(count), rate_(rate), deadline_ns_(deadline_ns) {
    sender_id_ =
        static_cast<std::uint16_t>((static_cast<unsigned>(::getpid()) * 2654435761u) >> 16) ^
        static_cast<std::uint16_t>(index * 40503u);
    std::string payload(o.size, ' ');
    static constexpr char filler[] = "hello from gateway-peer ";
    for (std::size_t i = peer_header_size; i < payload.size(); ++i)
      payload[i] = filler[(i - peer_header_size) % (sizeof filler - 1)];
    const std::string frame = protocol::encode_frame(o.address, payload);
    frame_size_ = frame.size();
    header_offset_ = protocol::header_size + o.address.size();
    frames_per_batch_ = std::clamp<std::size_t>(batch_bytes / frame_size_, 1, max_batch_frames);
    buffer_.reserve(frames_per_batch_ * frame_size_);
    for (std::size_t i = 0; i < frames_per_batch_; ++i)
      buffer_ += frame;
  }

  connection_result run(int fd) {
    connection_result r;
    const std::uint64_t start = monotonic_ns();
    std::uint64_t next_seq = 0;
    while (!stop_requested().load()) {
      if (count_ != 0 && next_seq >= count_) break;
      std::uint64_t now = monotonic_ns();
      if (deadline_ns_ != 0 && now >= deadline_ns_) break;
      std::size_t n = frames_per_batch_;
      if (count_ != 0) n = static_cast<std::size_t>(std::min<std::uint64_t>(n, count_ - next_seq));
      if (rate_ > 0) {
        // Token bucket: frames allowed so far minus frames sent, at most one batch at a time.
        const double allowed = rate_ * static_cast<double>(now - start) / 1e9 + 1.0;
        const double tokens = allowed - static_cast<double>(next_seq);
        if (tokens < 1.0) {
          const auto wait = static_cast<std::uint64_t>((1.0 - tokens) / rate_ * 1e9);
          sleep_ns(std::clamp<std::uint64_t>(wait, 1'000, 1'000'000));
          continue;
        }
        n = std::min<std::size_t>(n, static_cast<std::size_t>(tokens));
        now = monotonic_ns();
      }
      char* p = buffer_.data() + header_offset_;
      for (std::size_t i = 0; i < n; ++i, p += frame_size_)
        store_peer_header(p, peer_header{now, next_seq + i, sender_id_});
      std::string error;
      if (!write_all(fd, buffer_.data(), n * frame_size_, error)) {
        if (error == "stopped") break;
        ::close(fd);
        fd = -1;
        if (!o_.reconnect) {
          r.error = error;
          break;
        }
        // Frames of the failed write may or may not have arrived: the receiver counts them.
        while (fd < 0 && !stop_requested().load() &&
               (deadline_ns_ == 0 || monotonic_ns() < deadline_ns_)) {
          sleep_ns(100'000'000);
          std::string dial_error;
          fd = dial(o_.to, dial_error);
        }
        if (fd < 0) break;
        ++r.reconnects;
      }
      next_seq += n;
      r.frames += n;
      r.bytes += n * frame_size_;
    }
    if (fd >= 0) ::close(fd);
    return r;
  }

 private:
  const send_options& o_;
  std::uint64_t count_;
  double rate_;
  std::uint64_t deadline_ns_;
  std::uint16_t sender_id_ = 0;
  std::size_t frame_size_ = 0;
  std::size_t header_offset_ = 0;
  std::size_t frames_per_batch_ = 1;
  std::string buffer_;
};

}  // namespace

int run_sender(const send_options& o) {
  install_stop_handlers();
  const unsigned k = o.connections;
  // Dial everything first: an unreachable gateway is reported before anything is sent.
  std::vector<int> fds;
  for (unsigned i = 0; i < k; ++i) {
    std::string error;
    const int fd = dial(o.to, error);
    if (fd < 0) {
      std::fprintf(stderr, "gateway-peer send: %s\n", error.c_str());
      for (int f : fds)
        ::close(f);
      return exit_runtime_error;
    }
    fds.push_back(fd);
  }
  const std::uint64_t start = monotonic_ns();
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
  const double seconds = static_cast<double>(monotonic_ns() - start) / 1e9;
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
