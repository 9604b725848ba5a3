#include "tools/gateway_peer/receiver.hpp"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "protocol/control_message.hpp"
#include "tools/gateway_peer/stop_signal.hpp"
#include "tools/gateway_peer/tls_stream.hpp"
#include "tools/traffic/connection_reader.hpp"
#include "tools/traffic/sockets.hpp"

namespace gatewayd::tools {
namespace {

using traffic::log_histogram;
using traffic::monotonic_ns;

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

// One accepted gateway connection. Its slot is its verifier lane: a connection that replaces
// a closed one continues that lane's streams, so frames lost across a reconnect count as lost.
// With --one-consumer every connection is on lane 0: one copy of the traffic.
struct connection {
  connection(int f, std::size_t s, traffic::verifier& v, std::uint32_t lane)
      : fd(f), slot(s), reader(v, lane) {}
  int fd;
  std::size_t slot;
  traffic::connection_reader reader;
  std::unique_ptr<tls_stream> tls;  // with --tls-cert
  bool handshaken = false;
  // With --ack: data frames received whole on this connection, the N of the last ack encoded,
  // and that ack's bytes, of which `ack_out` went out (all of them: nothing waits).
  std::uint64_t frames = 0;
  std::uint64_t acked = 0;
  char ack_bytes[protocol::ack_size] = {};
  std::size_t ack_out = 0;
  std::size_t ack_size = 0;
  // With --seen-log: the identities of the frames received since the last ack (or read), in
  // the log's record format, until they count as taken.
  std::vector<char> seen;
};

// --seen-log's record: sender (u16), stream (u8), 0, sequence (u64), little-endian.
inline constexpr std::size_t seen_record_size = 12;

class receiver {
 public:
  explicit receiver(const recv_options& o) : o_(o) {}
  ~receiver() {
    for (auto* c : connections_) {
      ::close(c->fd);
      delete c;
    }
    if (epoll_ >= 0) ::close(epoll_);
    if (seen_fd_ >= 0) ::close(seen_fd_);
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }
  receiver(const receiver&) = delete;
  receiver& operator=(const receiver&) = delete;

  int run() {
    install_stop_handlers();
    if (o_.tls.enabled()) {
      std::string error;
      tls_ = make_tls_server(o_.tls, error);
      if (!tls_) {
        std::fprintf(stderr, "gateway-peer recv: %s\n", error.c_str());
        return exit_runtime_error;
      }
    }
    if (!o_.seen_log.empty()) {
      seen_fd_ =
          ::open(o_.seen_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
      if (seen_fd_ < 0) {
        std::perror(("gateway-peer recv: cannot open " + o_.seen_log).c_str());
        return exit_runtime_error;
      }
    }
    if (!listen()) return exit_runtime_error;
    epoll_ = epoll_create1(EPOLL_CLOEXEC);
    watch(listen_fd_, nullptr);
    start_ns_ = monotonic_ns();
    next_tick_ns_ = start_ns_ + 1'000'000'000u;
    const std::uint64_t deadline =
        o_.duration > 0 ? start_ns_ + static_cast<std::uint64_t>(o_.duration * 1e9) : 0;
    epoll_event events[64];
    while (!stop_requested().load() && !(o_.expect != 0 && distinct_frames() >= o_.expect)) {
      std::uint64_t now = monotonic_ns();
      if (deadline != 0 && now >= deadline) break;
      maybe_stall(now);
      hold_to_rate();
      const int n = epoll_wait(epoll_, events, 64, 100);
      now = monotonic_ns();
      bool to_accept = false;
      for (int i = 0; i < n; ++i) {
        auto* c = static_cast<connection*>(events[i].data.ptr);
        if (c == nullptr)
          to_accept = true;
        else if (!stalled_)
          read_from(*c, now);
      }
      // After the reads: a gateway that redials has its closed connection's slot (and lane)
      // free by then, when both came in the same wake-up.
      if (to_accept) accept_one();
      if (o_.ack && !stalled_) {
        for (auto* c : connections_)
          acknowledge(*c);  // what a full socket held back
      }
      if (now >= next_tick_ns_) tick(now);
    }
    fold_interval();
    return summarize();
  }

 private:
  bool listen() {
    std::error_code ec;
    listen_fd_ = traffic::listen_on(o_.listen, ec);
    if (listen_fd_ < 0) {
      std::fprintf(stderr, "gateway-peer recv: cannot listen on %s: %s\n",
                   o_.listen.to_string().c_str(), ec.message().c_str());
      return false;
    }
    auto bound = o_.listen;
    bound.port = traffic::local_port(listen_fd_);
    std::fprintf(stderr, "gateway-peer recv: listening on %s\n", bound.to_string().c_str());
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
    // --rate: a small buffer, so that what this reader has not read waits in the gateway.
    const int size = o_.rate > 0 ? 64 << 10 : 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    const std::size_t slot = take_slot();
    auto* c =
        new connection(fd, slot, verifier_, o_.one_consumer ? 0 : static_cast<std::uint32_t>(slot));
    if (tls_) c->tls = std::make_unique<tls_stream>(tls_.get(), fd, true);
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
    return slot_used_.size() - 1;
  }

  void close_connection(connection& c) {
    if (c.reader.has_partial()) ++cut_at_close_;
    epoll_ctl(epoll_, EPOLL_CTL_DEL, c.fd, nullptr);
    ::close(c.fd);
    slot_used_[c.slot] = false;
    std::erase(connections_, &c);
    delete &c;
  }

  // --rate: past the frames the rate allows since the first one, wait until the rate allows
  // more (in steps of 10 ms at most, so that a stop is still seen) instead of reading. One
  // wake-up reads what the receive buffer holds, so the whole wait must come before the next.
  // Time it did not read (nothing came, or this process did not run) counts for 0.1 s at most:
  // a replica held to N frames/s does not read a backlog faster afterwards to make up for it.
  void hold_to_rate() {
    if (o_.rate <= 0 || first_frame_ns_ == 0) return;
    const double burst = o_.rate * 0.1;
    while (!stop_requested().load()) {
      const auto now = monotonic_ns();
      const double allowed = o_.rate * static_cast<double>(now - first_frame_ns_) / 1e9;
      if (static_cast<double>(rate_frames_) < allowed - burst)
        rate_frames_ = static_cast<std::uint64_t>(allowed - burst);
      const double ahead = static_cast<double>(rate_frames_) - allowed;
      if (ahead <= 0) return;
      const double wait_ns = std::min(ahead / o_.rate * 1e9, 10e6);
      const timespec ts{0, static_cast<long>(wait_ns)};
      ::nanosleep(&ts, nullptr);
    }
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
    if (c.tls && !c.handshaken) {
      const auto step = c.tls->handshake();
      if (step == tls_stream::step::again) return;
      if (step == tls_stream::step::failed) {
        std::fprintf(stderr, "gateway-peer recv: connection %zu: %s; closing it\n", c.slot + 1,
                     c.tls->error().c_str());
        return close_connection(c);
      }
      c.handshaken = true;
    }
    std::error_code ec;
    const auto on_frame = [&](const protocol::frame_view& f,
                              const std::optional<traffic::payload_header>& h) {
      if (seen_fd_ >= 0 && h) note_seen(c, *h);
      ++interval_frames_;
      ++rate_frames_;
      ++c.frames;
      interval_bytes_ += f.bytes.size();
      if (o_.print) print(f);
    };
    auto state = traffic::connection_reader::state::open;
    if (c.tls) {
      // Until OpenSSL wants the socket again: records it already read (read-ahead) would
      // otherwise wait for the socket's next readiness, which may never come.
      do {
        state = c.reader.read_with([&](void* b, std::size_t n) { return c.tls->read(b, n); }, now,
                                   on_frame, ec);
      } while (state == traffic::connection_reader::state::open && !c.tls->drained());
    } else {
      state = c.reader.read_some(c.fd, now, on_frame, ec);
    }
    if (state == traffic::connection_reader::state::corrupt) {
      const auto& e = c.reader.error();
      std::fprintf(stderr,
                   "gateway-peer recv: corrupt frame on connection %zu at stream offset %llu: "
                   "%s; closing it\n",
                   c.slot + 1, ull(e.offset), std::string(protocol::to_string(e.reason)).c_str());
    }
    // Without --ack a frame counts as taken once read; with it, once its ack is written.
    if (!o_.ack) log_seen(c);
    if (state != traffic::connection_reader::state::open) return close_connection(c);
    if (first_frame_ns_ == 0) first_frame_ns_ = now;
    last_frame_ns_ = now;
    if (o_.ack) acknowledge(c);
  }

  // `ack N` for what this connection has taken whole, when N grew since the last ack; one
  // that the socket cannot take now waits (and is then sent before a newer one, never cut).
  // A write error is left to the next read, which sees the connection closed.
  void acknowledge(connection& c) {
    if (!flush_ack(c) || c.frames == c.acked) return;
    c.ack_size = protocol::encode_control(
        {protocol::control_message::kind::ack, c.frames, protocol::reject_reason::dropped},
        c.ack_bytes);
    c.ack_out = 0;
    c.acked = c.frames;
    ++acks_;
    log_seen(c);
    flush_ack(c);
  }

  static void note_seen(connection& c, const traffic::payload_header& h) {
    char r[seen_record_size] = {};
    r[0] = static_cast<char>(h.sender & 0xff);
    r[1] = static_cast<char>(h.sender >> 8);
    r[2] = static_cast<char>(h.stream);
    for (int i = 0; i < 8; ++i)
      r[4 + i] = static_cast<char>(h.sequence >> (8 * i));
    c.seen.insert(c.seen.end(), r, r + seen_record_size);
  }

  // Appends the connection's pending identities to --seen-log (a plain write: the page cache
  // keeps it if this process is killed right after).
  void log_seen(connection& c) {
    if (seen_fd_ < 0 || c.seen.empty()) return;
    std::size_t off = 0;
    while (off < c.seen.size()) {
      const ssize_t w = ::write(seen_fd_, c.seen.data() + off, c.seen.size() - off);
      if (w <= 0) {
        if (w < 0 && errno == EINTR) continue;
        std::perror("gateway-peer recv: --seen-log");
        ::close(seen_fd_);
        seen_fd_ = -1;
        break;
      }
      off += static_cast<std::size_t>(w);
    }
    c.seen.clear();
  }

  // True once nothing of the last ack waits to be written.
  static bool flush_ack(connection& c) {
    if (c.tls) {
      if (c.ack_out < c.ack_size) {
        if (c.tls->put({c.ack_bytes, c.ack_size}) != tls_stream::step::done) return false;
        c.ack_out = c.ack_size;
      }
      return c.tls->flush() == tls_stream::step::done;
    }
    while (c.ack_out < c.ack_size) {
      const ssize_t w = ::send(c.fd, c.ack_bytes + c.ack_out, c.ack_size - c.ack_out,
                               MSG_DONTWAIT | MSG_NOSIGNAL);
      if (w <= 0) return false;
      c.ack_out += static_cast<std::size_t>(w);
    }
    return true;
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
    latency_.merge(verifier_.latency());
    if (first_frame_ns_ != 0) per_second_.push_back(interval_frames_);
    interval_frames_ = 0;
    interval_bytes_ = 0;
    verifier_.reset_latency();
  }

  void tick(std::uint64_t now) {
    const double secs = static_cast<double>(now - (next_tick_ns_ - 1'000'000'000u)) / 1e9;
    if (interval_frames_ == 0 && !connections_.empty()) {
      std::fprintf(stderr, "[%6.1fs] no frames  conns %zu%s\n",
                   static_cast<double>(now - start_ns_) / 1e9, connections_.size(),
                   stalled_ ? "  (stalled)" : "");
    } else if (interval_frames_ != 0) {
      const auto& interval_latency = verifier_.latency();
      const auto& counts = verifier_.counts();
      std::fprintf(
          stderr,
          "[%6.1fs] %9.0f frames/s %8.1f MB/s  p50 %s p99 %s p99.9 %s max %s  "
          "lost %llu reord %llu dup %llu  conns %zu%s\n",
          static_cast<double>(now - start_ns_) / 1e9, static_cast<double>(interval_frames_) / secs,
          static_cast<double>(interval_bytes_) / secs / 1e6,
          format_ns(interval_latency.quantile(0.5)).c_str(),
          format_ns(interval_latency.quantile(0.99)).c_str(),
          format_ns(interval_latency.quantile(0.999)).c_str(),
          format_ns(interval_latency.max()).c_str(), ull(counts.lost), ull(counts.reordered),
          ull(counts.duplicated), connections_.size(), stalled_ ? "  (stalled)" : "");
    }
    fold_interval();
    next_tick_ns_ += 1'000'000'000u;
    if (next_tick_ns_ <= now) next_tick_ns_ = now + 1'000'000'000u;
  }

  // Frames received, each counted once: a frame resent after a failure (confirms and acks make
  // delivery at-least-once) arrives twice and is one frame of --expect.
  std::uint64_t distinct_frames() const noexcept {
    return frames_ + interval_frames_ - verifier_.counts().duplicated;
  }

  int summarize() {
    const double active = last_frame_ns_ > first_frame_ns_
                              ? static_cast<double>(last_frame_ns_ - first_frame_ns_) / 1e9
                              : 0.0;
    const double fps = active > 0 ? static_cast<double>(frames_) / active : 0;
    const double mbps = active > 0 ? static_cast<double>(bytes_) / active / 1e6 : 0;
    const auto& c = verifier_.counts();
    const bool expect_missed = o_.expect != 0 && distinct_frames() < o_.expect;
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
          "\"duplicated\": %llu, \"late\": %llu, \"corrupt\": %llu, \"cut_at_close\": %llu, "
          "\"untimed\": %llu, \"streams\": %zu, \"connections_accepted\": %llu, "
          "\"acks\": %llu, \"stalled\": %s, \"per_second\": [%s]}\n",
          ull(frames_), ull(bytes_), active, fps, mbps, ull(latency_.quantile(0.5)),
          ull(latency_.quantile(0.99)), ull(latency_.quantile(0.999)), ull(latency_.max()),
          ull(latency_.count()), ull(c.lost), ull(c.reordered), ull(c.duplicated), ull(c.late),
          ull(c.corrupt), ull(cut_at_close_), ull(c.untimed), verifier_.streams().size(),
          ull(accepted_), ull(acks_), stalled_ ? "true" : "false", per_second.c_str());
    } else {
      std::printf(
          "received %llu frames (%llu bytes) on %llu connection(s): %.0f frames/s, "
          "%.1f MB/s over %.2f s of traffic\n"
          "latency: p50 %s  p99 %s  p99.9 %s  max %s\n"
          "lost %llu  duplicated %llu  reordered %llu  late %llu  corrupt %llu  "
          "cut at close %llu  streams %zu\n",
          ull(frames_), ull(bytes_), ull(accepted_), fps, mbps, active,
          format_ns(latency_.quantile(0.5)).c_str(), format_ns(latency_.quantile(0.99)).c_str(),
          format_ns(latency_.quantile(0.999)).c_str(), format_ns(latency_.max()).c_str(),
          ull(c.lost), ull(c.duplicated), ull(c.reordered), ull(c.late), ull(c.corrupt),
          ull(cut_at_close_), verifier_.streams().size());
      if (o_.ack) std::printf("acks sent %llu\n", ull(acks_));
    }
    std::fflush(stdout);
    if (expect_missed)
      std::fprintf(stderr, "gateway-peer recv: expected %llu frames, received %llu\n",
                   ull(o_.expect), ull(frames_));
    return c.corrupt != 0 || expect_missed ? exit_verify_failed : exit_ok;
  }

  static unsigned long long ull(std::uint64_t v) { return static_cast<unsigned long long>(v); }

  const recv_options& o_;
  ssl_ctx_ptr tls_;  // with --tls-cert
  traffic::verifier verifier_;
  int listen_fd_ = -1;
  int epoll_ = -1;
  int seen_fd_ = -1;  // --seen-log
  std::vector<connection*> connections_;
  std::vector<bool> slot_used_;
  bool stalled_ = false;
  std::uint64_t rate_frames_ = 0;  // frames read, for --rate (raised past a long pause)
  std::uint64_t start_ns_ = 0, next_tick_ns_ = 0, first_frame_ns_ = 0, last_frame_ns_ = 0;
  std::uint64_t frames_ = 0, bytes_ = 0, interval_frames_ = 0, interval_bytes_ = 0;
  std::uint64_t cut_at_close_ = 0, accepted_ = 0, acks_ = 0;
  log_histogram latency_;  // the whole run; the verifier's holds the current second
  std::vector<std::uint64_t> per_second_;
};

}  // namespace

int run_receiver(const recv_options& options) {
  receiver r(options);
  return r.run();
}

}  // namespace gatewayd::tools
