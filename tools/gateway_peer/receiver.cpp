#include "tools/gateway_peer/receiver.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "protocol/frame_codec.hpp"
#include "tools/gateway_peer/log_histogram.hpp"
#include "tools/gateway_peer/peer_header.hpp"
#include "tools/gateway_peer/sequence_tracker.hpp"
#include "tools/gateway_peer/stop_signal.hpp"

namespace gatewayd::tools {
namespace {

constexpr std::uint32_t receive_max_payload = 256u << 20;
constexpr std::size_t read_size = 1 << 20;

std::string format_ns(std::uint64_t ns) {
  char buf[32];
  if (ns < 10'000)
    std::snprintf(buf, sizeof buf, "%.2fus", static_cast<double>(ns) / 1e3);
  else if (ns < 1'000'000)
    std::snprintf(buf, sizeof buf, "%.0fus", static_cast<double>(ns) / 1e3);
  else if (ns < 1'000'000'000)
    std::snprintf(buf, sizeof buf, "%.2fms", static_cast<double>(ns) / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.2fs", static_cast<double>(ns) / 1e9);
  return buf;
}

// One accepted gateway connection. `slot` picks the sequence tracker: a connection that
// replaces a closed one continues its stream, so frames lost across a reconnect count as lost.
struct connection {
  int fd = -1;
  std::size_t slot = 0;
  std::uint64_t offset = 0;  // stream bytes consumed, for error messages
  std::string carry;         // a partial frame waiting for its tail
};

class receiver {
 public:
  explicit receiver(const recv_options& o) : o_(o), buffer_(read_size) {}
  ~receiver() {
    for (auto* c : connections_) {
      ::close(c->fd);
      delete c;
    }
    if (epoll_ >= 0) ::close(epoll_);
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }
  receiver(const receiver&) = delete;
  receiver& operator=(const receiver&) = delete;

  int run() {
    install_stop_handlers();
    if (!listen()) return exit_runtime_error;
    epoll_ = epoll_create1(EPOLL_CLOEXEC);
    watch(listen_fd_, nullptr);
    start_ns_ = monotonic_ns();
    next_tick_ns_ = start_ns_ + 1'000'000'000u;
    const std::uint64_t deadline =
        o_.duration > 0 ? start_ns_ + static_cast<std::uint64_t>(o_.duration * 1e9) : 0;
    epoll_event events[64];
    while (!stop_requested().load() && !(o_.expect != 0 && frames_ >= o_.expect)) {
      std::uint64_t now = monotonic_ns();
      if (deadline != 0 && now >= deadline) break;
      maybe_stall(now);
      const int n = epoll_wait(epoll_, events, 64, 100);
      now = monotonic_ns();
      for (int i = 0; i < n; ++i) {
        auto* c = static_cast<connection*>(events[i].data.ptr);
        if (c == nullptr)
          accept_one();
        else if (!stalled_)
          read_from(*c, now);
      }
      if (now >= next_tick_ns_) tick(now);
    }
    fold_interval();
    return summarize();
  }

 private:
  bool listen() {
    const bool v6 = o_.listen.is_ipv6();
    listen_fd_ = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_storage addr{};
    socklen_t len = 0;
    if (v6) {
      auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
      a->sin6_family = AF_INET6;
      a->sin6_port = htons(o_.listen.port);
      inet_pton(AF_INET6, o_.listen.host.c_str(), &a->sin6_addr);
      len = sizeof *a;
    } else {
      auto* a = reinterpret_cast<sockaddr_in*>(&addr);
      a->sin_family = AF_INET;
      a->sin_port = htons(o_.listen.port);
      inet_pton(AF_INET, o_.listen.host.c_str(), &a->sin_addr);
      len = sizeof *a;
    }
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(listen_fd_, 4096) != 0) {
      std::fprintf(stderr, "gateway-peer recv: cannot listen on %s: %s\n",
                   o_.listen.to_string().c_str(), std::strerror(errno));
      return false;
    }
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    const unsigned port = ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                   : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    std::fprintf(stderr, "gateway-peer recv: listening on %s%s%s:%u\n", v6 ? "[" : "",
                 o_.listen.host.c_str(), v6 ? "]" : "", port);
    return true;
  }

  void watch(int fd, connection* c) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = c;
    epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev);
  }

  void accept_one() {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    const int size = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    auto* c = new connection;
    c->fd = fd;
    c->slot = take_slot();
    connections_.push_back(c);
    ++accepted_;
    if (!stalled_) watch(fd, c);
  }

  std::size_t take_slot() {
    for (std::size_t i = 0; i < slot_used_.size(); ++i) {
      if (!slot_used_[i]) {
        slot_used_[i] = true;
        return i;
      }
    }
    slot_used_.push_back(true);
    trackers_.emplace_back();
    return slot_used_.size() - 1;
  }

  void close_connection(connection& c) {
    if (!c.carry.empty()) ++cut_at_close_;
    epoll_ctl(epoll_, EPOLL_CTL_DEL, c.fd, nullptr);
    ::close(c.fd);
    slot_used_[c.slot] = false;
    std::erase(connections_, &c);
    delete &c;
  }

  void maybe_stall(std::uint64_t now) {
    if (stalled_ || o_.stall_after < 0 || first_frame_ns_ == 0) return;
    if (now < first_frame_ns_ + static_cast<std::uint64_t>(o_.stall_after * 1e9)) return;
    stalled_ = true;
    for (auto* c : connections_)
      epoll_ctl(epoll_, EPOLL_CTL_DEL, c->fd, nullptr);
    std::fprintf(stderr, "gateway-peer recv: stalled: no longer reading (--stall-after)\n");
  }

  void read_from(connection& c, std::uint64_t now) {
    // The partial frame left from the last read goes first, then the new bytes after it.
    std::size_t have = c.carry.size();
    if (buffer_.size() < have + read_size) buffer_.resize(have + read_size);
    std::memcpy(buffer_.data(), c.carry.data(), have);
    const ssize_t r = ::read(c.fd, buffer_.data() + have, buffer_.size() - have);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
      close_connection(c);
      return;
    }
    if (r < 0) return;
    have += static_cast<std::size_t>(r);
    if (first_frame_ns_ == 0) first_frame_ns_ = now;
    last_frame_ns_ = now;
    std::string_view rest(buffer_.data(), have);
    auto& tracker = trackers_[c.slot];
    while (!rest.empty()) {
      const auto p = protocol::parse_frame(rest, receive_max_payload);
      if (p.state == protocol::parse_result::status::need_more) break;
      if (p.state == protocol::parse_result::status::error) {
        ++corrupt_;
        std::fprintf(stderr,
                     "gateway-peer recv: corrupt frame on connection %zu at stream offset "
                     "%llu: %s; closing it\n",
                     c.slot + 1, static_cast<unsigned long long>(c.offset + p.error_offset),
                     std::string(protocol::to_string(p.error)).c_str());
        c.carry.clear();
        close_connection(c);
        return;
      }
      const auto& f = p.frame;
      ++interval_frames_;
      interval_bytes_ += f.bytes.size();
      if (f.payload.size() >= peer_header_size) {
        const auto h = load_peer_header(f.payload.data());
        interval_latency_.record(now > h.send_ns ? now - h.send_ns : 0);
        tracker.record(h.sender_id, h.sequence);
      } else {
        ++untimed_;
      }
      if (o_.print) print(f);
      rest.remove_prefix(f.bytes.size());
      c.offset += f.bytes.size();
      if (o_.expect != 0 && frames_ + interval_frames_ >= o_.expect) break;
    }
    c.carry.assign(rest.data(), rest.size());
  }

  void print(const protocol::frame_view& f) {
    std::string preview;
    for (std::size_t i = 0; i < f.payload.size() && preview.size() < 64; ++i) {
      const auto ch = static_cast<unsigned char>(f.payload[i]);
      preview += std::isprint(ch) ? static_cast<char>(ch) : '.';
    }
    std::printf("%.*s  %zu B  \"%s%s\"\n", static_cast<int>(f.address.size()), f.address.data(),
                f.payload.size(), preview.c_str(), f.payload.size() > 64 ? "..." : "");
    std::fflush(stdout);
  }

  void fold_interval() {
    frames_ += interval_frames_;
    bytes_ += interval_bytes_;
    latency_.merge(interval_latency_);
    if (first_frame_ns_ != 0) per_second_.push_back(interval_frames_);
    interval_frames_ = 0;
    interval_bytes_ = 0;
    interval_latency_.reset();
  }

  void tick(std::uint64_t now) {
    const double secs = static_cast<double>(now - (next_tick_ns_ - 1'000'000'000u)) / 1e9;
    if (interval_frames_ == 0 && !connections_.empty()) {
      std::fprintf(stderr, "[%6.1fs] no frames  conns %zu%s\n",
                   static_cast<double>(now - start_ns_) / 1e9, connections_.size(),
                   stalled_ ? "  (stalled)" : "");
    } else if (interval_frames_ != 0) {
      std::fprintf(stderr,
                   "[%6.1fs] %9.0f frames/s %8.1f MB/s  p50 %s p99 %s p99.9 %s max %s  "
                   "lost %llu reord %llu dup %llu  conns %zu%s\n",
                   static_cast<double>(now - start_ns_) / 1e9,
                   static_cast<double>(interval_frames_) / secs,
                   static_cast<double>(interval_bytes_) / secs / 1e6,
                   format_ns(interval_latency_.quantile(0.5)).c_str(),
                   format_ns(interval_latency_.quantile(0.99)).c_str(),
                   format_ns(interval_latency_.quantile(0.999)).c_str(),
                   format_ns(interval_latency_.max()).c_str(),
                   static_cast<unsigned long long>(sum(&sequence_tracker::lost)),
                   static_cast<unsigned long long>(sum(&sequence_tracker::reordered)),
                   static_cast<unsigned long long>(sum(&sequence_tracker::duplicated)),
                   connections_.size(), stalled_ ? "  (stalled)" : "");
    }
    fold_interval();
    next_tick_ns_ += 1'000'000'000u;
    if (next_tick_ns_ <= now) next_tick_ns_ = now + 1'000'000'000u;
  }

  std::uint64_t sum(std::uint64_t (sequence_tracker::*field)() const noexcept) const {
    std::uint64_t s = 0;
    for (const auto& t : trackers_)
      s += (t.*field)();
    return s;
  }

  int summarize() {
    const double active = last_frame_ns_ > first_frame_ns_
                              ? static_cast<double>(last_frame_ns_ - first_frame_ns_) / 1e9
                              : 0.0;
    const double fps = active > 0 ? static_cast<double>(frames_) / active : 0;
    const double mbps = active > 0 ? static_cast<double>(bytes_) / active / 1e6 : 0;
    const auto lost = sum(&sequence_tracker::lost);
    const auto reordered = sum(&sequence_tracker::reordered);
    const auto duplicated = sum(&sequence_tracker::duplicated);
    const bool expect_missed = o_.expect != 0 && frames_ < o_.expect;
    if (o_.json) {
      std::string per_second;
      for (std::size_t i = 0; i < per_second_.size(); ++i) {
        if (i) per_second += ", ";
        per_second += std::to_string(per_second_[i]);
      }
      std::printf(
          "{\"frames\": %llu, \"bytes\": %llu, \"active_seconds\": %.6f, \"frames_per_s\": %.1f, "
          "\"mb_per_s\": %.3f, \"latency_ns\": {\"p50\": %llu, \"p99\": %llu, \"p999\": %llu, "
          "\"max\": %llu, \"count\": %llu}, \"lost\": %llu, \"reordered\": %llu, "
          "\"duplicated\": %llu, \"corrupt\": %llu, \"cut_at_close\": %llu, \"untimed\": %llu, "
          "\"connections_accepted\": %llu, \"stalled\": %s, \"per_second\": [%s]}\n",
          ull(frames_), ull(bytes_), active, fps, mbps, ull(latency_.quantile(0.5)),
          ull(latency_.quantile(0.99)), ull(latency_.quantile(0.999)), ull(latency_.max()),
          ull(latency_.count()), ull(lost), ull(reordered), ull(duplicated), ull(corrupt_),
          ull(cut_at_close_), ull(untimed_), ull(accepted_), stalled_ ? "true" : "false",
          per_second.c_str());
    } else {
      std::printf(
          "received %llu frames (%llu bytes) on %llu connection(s): %.0f frames/s, "
          "%.1f MB/s over %.2f s of traffic\n"
          "latency: p50 %s  p99 %s  p99.9 %s  max %s\n"
          "lost %llu  reordered %llu  duplicated %llu  corrupt %llu  cut at close %llu\n",
          ull(frames_), ull(bytes_), ull(accepted_), fps, mbps, active,
          format_ns(latency_.quantile(0.5)).c_str(), format_ns(latency_.quantile(0.99)).c_str(),
          format_ns(latency_.quantile(0.999)).c_str(), format_ns(latency_.max()).c_str(), ull(lost),
          ull(reordered), ull(duplicated), ull(corrupt_), ull(cut_at_close_));
    }
    std::fflush(stdout);
    if (expect_missed)
      std::fprintf(stderr, "gateway-peer recv: expected %llu frames, received %llu\n",
                   ull(o_.expect), ull(frames_));
    return corrupt_ != 0 || expect_missed ? exit_verify_failed : exit_ok;
  }

  static unsigned long long ull(std::uint64_t v) { return static_cast<unsigned long long>(v); }

  const recv_options& o_;
  std::vector<char> buffer_;
  int listen_fd_ = -1;
  int epoll_ = -1;
  std::vector<connection*> connections_;
  std::vector<bool> slot_used_;
  std::vector<sequence_tracker> trackers_;
  bool stalled_ = false;
  std::uint64_t start_ns_ = 0, next_tick_ns_ = 0, first_frame_ns_ = 0, last_frame_ns_ = 0;
  std::uint64_t frames_ = 0, bytes_ = 0, interval_frames_ = 0, interval_bytes_ = 0;
  std::uint64_t corrupt_ = 0, cut_at_close_ = 0, untimed_ = 0, accepted_ = 0;
  log_histogram latency_, interval_latency_;
  std::vector<std::uint64_t> per_second_;
};

}  // namespace

int run_receiver(const recv_options& options) {
  receiver r(options);
  return r.run();
}

}  // namespace gatewayd::tools
