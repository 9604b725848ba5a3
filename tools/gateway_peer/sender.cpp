#include "tools/gateway_peer/sender.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tools/gateway_peer/confirm_sender.hpp"
#include "tools/gateway_peer/send_report.hpp"
#include "tools/gateway_peer/stop_signal.hpp"
#include "tools/gateway_peer/tls_stream.hpp"
#include "tools/traffic/frame_batch.hpp"
#include "tools/traffic/payload_header.hpp"
#include "tools/traffic/supplier_link.hpp"

namespace gatewayd::tools {

// Every connection is a sender of its own, numbered from 0, since order is kept per supplier
// connection only. An odd step keeps 65536 consecutive ids of this process distinct.
std::uint16_t next_sender_id() {
  static std::atomic<unsigned> made{0};
  const unsigned base = (static_cast<unsigned>(::getpid()) * 2654435761u) >> 16;
  return static_cast<std::uint16_t>(base + made.fetch_add(1) * 40503u);
}

namespace {

void sleep_ns(std::uint64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000u), static_cast<long>(ns % 1'000'000'000u)};
  clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, nullptr);
}

std::string joined(const std::vector<net::endpoint>& to) {
  std::string s;
  for (const auto& e : to) {
    if (!s.empty()) s += ',';
    s += e.to_string();
  }
  return s;
}

class connection_sender {
 public:
  // `tls`: the TLS layer over the link's connection, or null for plaintext.
  connection_sender(const send_options& o, std::uint64_t count, double rate,
                    std::uint64_t deadline_ns, tls_stream* tls)
      : tls_(tls),
        o_(o),
        count_(count),
        rate_(rate),
        deadline_ns_(deadline_ns),
        batch_(o.addresses, o.size, 0, 4096, 256 * 1024, 0, o.spread) {}

  connection_result run(traffic::supplier_link& link) {
    connection_result r;
    open_record(link, r);
    const std::uint64_t start = traffic::monotonic_ns();
    std::uint64_t next = 0;  // frames written whole, over all its connections
    std::size_t resend = 0;  // frames of a failed write, sent first on the next connection
    struct {
      std::size_t frames = 0;
      std::size_t bytes = 0;
    } last;  // the last write on this connection
    while (!stop_requested().load()) {
      if (count_ != 0 && next >= count_) break;
      std::uint64_t now = traffic::monotonic_ns();
      if (deadline_ns_ != 0 && now >= deadline_ns_) break;
      if (link.asked_to_leave()) {
        // gatewayd's lame-duck stop: it reads what we sent until we close our side too.
        if (link.leave()) {
          r.links.back().ended = "asked to leave";
          if (!move_on(link, r, "the gateway asked us to leave (it is stopping)")) return r;
          continue;
        }
        // Not a stop: the gateway was gone and reset what we wrote after it went, which is at
        // most the last write (each write begins by looking for its end-of-file). That write
        // counts as failed: written again on the next connection, and reported.
        r.links.back().ended = "lost: reset after end-of-file";
        next -= last.frames;
        r.frames -= last.frames;
        r.bytes -= last.bytes;
        r.links.back().frames -= last.frames;
        if (!move_on(link, r, "connection lost: reset after end-of-file")) return r;
        resend = last.frames;
        last = {};
        continue;
      }
      std::size_t n = resend;
      if (n == 0) {
        n = batch_.capacity();
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
      }
      const auto bytes = batch_.next(n, now);
      std::error_code ec;
      if (!(tls_ ? tls_->write_all(bytes, stop_requested(), ec)
                 : link.send(bytes, stop_requested(), ec))) {
        if (ec == std::errc::operation_canceled) break;
        // Some of these frames may have arrived: they are written again on the next
        // connection, and reported, rather than silently possibly lost.
        r.links.back().ended = "lost: " + ec.message();
        link.drop();
        if (!move_on(link, r, "connection lost: " + ec.message())) return r;
        resend = n;
        last = {};
        continue;
      }
      if (resend != 0) r.resent += n;
      resend = 0;
      last = {n, bytes.size()};
      next += n;
      r.frames += n;
      r.bytes += bytes.size();
      r.links.back().frames += n;
    }
    if (tls_) tls_->close_notify();
    link.leave();
    return r;
  }

 private:
  void open_record(const traffic::supplier_link& link, connection_result& r) {
    const std::uint16_t id = next_sender_id();
    batch_.renumber(id);
    r.links.push_back({link.peer().to_string(), link.local(), id, 0, "stopped"});
  }

  // After a connection ended: on to the next address (with --reconnect or several --to), or
  // the end with `why` as the error.
  bool move_on(traffic::supplier_link& link, connection_result& r, const std::string& why) {
    if (!o_.reconnect) {
      r.error = why;
      return false;
    }
    if (!link.reconnect(stop_requested(), deadline_ns_)) return false;
    open_record(link, r);
    return true;
  }

  tls_stream* tls_;
  const send_options& o_;
  std::uint64_t count_;
  double rate_;
  std::uint64_t deadline_ns_;
  traffic::frame_batch batch_;
};

// With --confirm: what became of the frames, for the JSON summary and the text one.
std::string confirm_json(const send_options& o, const connection_result& total) {
  if (!o.confirm) return {};
  const auto& c = total.confirm;
  std::uint64_t rejected = 0;
  std::string by_reason;
  for (std::size_t i = 0; i < c.rejected.size(); ++i) {
    rejected += c.rejected[i];
    by_reason += (i ? ", \"" : "\"") +
                 std::string(protocol::to_string(static_cast<protocol::reject_reason>(i + 1))) +
                 "\": " + std::to_string(c.rejected[i]);
  }
  return ", \"window\": " + std::to_string(o.window) +
         ", \"confirmed\": " + std::to_string(c.confirmed) +
         ", \"rejected\": " + std::to_string(rejected) + ", \"rejected_by_reason\": {" + by_reason +
         "}, \"unconfirmed\": " + std::to_string(c.unconfirmed) +
         ", \"control_errors\": " + std::to_string(c.control_errors);
}

void print_confirm_text(const connection_result& total) {
  const auto& c = total.confirm;
  const auto ull = [](std::uint64_t v) { return static_cast<unsigned long long>(v); };
  std::uint64_t rejected = 0;
  for (const auto r : c.rejected)
    rejected += r;
  std::printf(
      "confirm: %llu sent, %llu resent, %llu confirmed, %llu rejected (dropped %llu, "
      "unroutable %llu, not_permitted %llu, removed %llu), %llu unconfirmed at exit, "
      "%llu bad control frame(s)\n",
      ull(total.frames), ull(total.resent), ull(c.confirmed), ull(rejected), ull(c.rejected[0]),
      ull(c.rejected[1]), ull(c.rejected[2]), ull(c.rejected[3]), ull(c.unconfirmed),
      ull(c.control_errors));
}

void print_report(const send_options& o, const connection_result& total, double seconds) {
  const double fps = seconds > 0 ? static_cast<double>(total.frames) / seconds : 0;
  const double mbps = seconds > 0 ? static_cast<double>(total.bytes) / seconds / 1e6 : 0;
  std::uint64_t asked = 0, lost = 0;
  for (const auto& l : total.links) {
    asked += l.ended == "asked to leave";
    lost += l.ended.rfind("lost", 0) == 0;
  }
  const std::uint64_t bad = total.confirm.control_errors;
  const std::uint64_t reconnects = total.links.size() - o.connections;
  const auto ull = [](std::uint64_t v) { return static_cast<unsigned long long>(v); };
  if (o.json) {
    std::string links;
    for (const auto& l : total.links) {
      char one[256];
      std::snprintf(one, sizeof one,
                    "%s{\"to\": \"%s\", \"from\": \"%s\", \"sender\": %u, \"frames\": %llu, "
                    "\"ended\": \"%s\"}",
                    links.empty() ? "" : ", ", l.to.c_str(), l.from.c_str(), l.sender,
                    ull(l.frames), l.ended.c_str());
      links += one;
    }
    std::printf(
        "{\"frames\": %llu, \"bytes\": %llu, \"seconds\": %.6f, \"frames_per_s\": %.1f, "
        "\"mb_per_s\": %.3f, \"connections\": %u, \"reconnects\": %llu, \"asked_to_leave\": %llu, "
        "\"lost\": %llu, \"resent\": %llu%s, \"error\": \"%s\", \"links\": [%s]}\n",
        ull(total.frames), ull(total.bytes), seconds, fps, mbps, o.connections, ull(reconnects),
        ull(asked), ull(lost), ull(total.resent), confirm_json(o, total).c_str(),
        total.error.c_str(), links.c_str());
  } else {
    std::printf(
        "sent %llu frames (%llu bytes) on %u connection(s) in %.2f s: %.0f frames/s, "
        "%.1f MB/s\n",
        ull(total.frames), ull(total.bytes), o.connections, seconds, fps, mbps);
    if (o.confirm) print_confirm_text(total);
    if (asked + lost + bad != 0) {
      if (o.confirm) {
        std::printf(
            "%llu connection(s) ended early: %llu asked to leave by a stopping gateway, %llu lost, "
            "%llu dropped for a bad control frame; reconnected %llu time(s)\n",
            ull(asked + lost + bad), ull(asked), ull(lost), ull(bad), ull(reconnects));
      } else {
        std::printf(
            "%llu connection(s) ended early: %llu asked to leave by a stopping gateway, %llu "
            "lost; reconnected %llu time(s); re-sent %llu frames whose write had failed (they "
            "may have arrived twice)\n",
            ull(asked + lost), ull(asked), ull(lost), ull(reconnects), ull(total.resent));
      }
      for (const auto& l : total.links)
        std::printf("  %s -> %s (sender %u): %llu frames, %s\n", l.from.c_str(), l.to.c_str(),
                    l.sender, ull(l.frames), l.ended.c_str());
    }
  }
}

// With --tls-ca: a handshake on every connection before anything is sent (a refusal is
// reported like an unreachable gateway). Each connection has its own SSL, used by one thread.
bool start_tls(const send_options& o,
               const std::vector<std::unique_ptr<traffic::supplier_link>>& links,
               std::vector<std::unique_ptr<tls_stream>>& out) {
  if (!o.tls.enabled()) return true;
  std::string error;
  const ssl_ctx_ptr ctx = make_tls_client(o.tls, error);  // each SSL holds a reference
  if (!ctx) {
    std::fprintf(stderr, "gateway-peer send: %s\n", error.c_str());
    return false;
  }
  const std::uint64_t deadline = traffic::monotonic_ns() + 10'000'000'000u;
  for (const auto& link : links) {
    out.push_back(
        std::make_unique<tls_stream>(ctx.get(), link->native_handle(), false, o.tls.server_name));
    auto step = tls_stream::step::again;
    // A blocking socket whose timeouts wake it: `again` only when one ran out.
    while ((step = out.back()->handshake()) == tls_stream::step::again &&
           traffic::monotonic_ns() < deadline && !stop_requested().load()) {
    }
    if (step != tls_stream::step::done) {
      std::fprintf(stderr, "gateway-peer send: %s: %s\n", link->peer().to_string().c_str(),
                   step == tls_stream::step::failed ? out.back()->error().c_str()
                                                    : "TLS handshake timed out");
      return false;
    }
  }
  return true;
}

}  // namespace

int run_sender(const send_options& o) {
  install_stop_handlers();
  const unsigned k = o.connections;
  // Dial everything first: an unreachable gateway is reported before anything is sent.
  // Connection i starts at address i mod n, so k connections spread over n gateways.
  std::vector<std::unique_ptr<traffic::supplier_link>> links;
  for (unsigned i = 0; i < k; ++i) {
    links.push_back(std::make_unique<traffic::supplier_link>(o.to, i));
    std::error_code ec;
    if (!links.back()->connect(ec)) {
      std::fprintf(stderr, "gateway-peer send: cannot connect to %s: %s\n", joined(o.to).c_str(),
                   ec.message().c_str());
      return exit_runtime_error;
    }
  }
  std::vector<std::unique_ptr<tls_stream>> tls;
  if (!start_tls(o, links, tls)) return exit_runtime_error;
  const std::uint64_t start = traffic::monotonic_ns();
  const std::uint64_t deadline =
      o.duration > 0 ? start + static_cast<std::uint64_t>(o.duration * 1e9) : 0;
  std::vector<connection_result> results(k);
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < k; ++i) {
    const std::uint64_t count = o.count == 0 ? 0 : o.count / k + (i < o.count % k ? 1 : 0);
    threads.emplace_back([&, i, count] {
      if (o.confirm) {
        confirm_sender s(o, count, o.rate / k, deadline, tls.empty() ? nullptr : tls[i].get());
        results[i] = s.run(*links[i]);
        return;
      }
      connection_sender s(o, count, o.rate / k, deadline, tls.empty() ? nullptr : tls[i].get());
      results[i] = s.run(*links[i]);
    });
  }
  for (auto& t : threads)
    t.join();
  const double seconds = static_cast<double>(traffic::monotonic_ns() - start) / 1e9;
  connection_result total;
  for (const auto& r : results) {
    total.frames += r.frames;
    total.bytes += r.bytes;
    total.resent += r.resent;
    total.confirm.confirmed += r.confirm.confirmed;
    total.confirm.unconfirmed += r.confirm.unconfirmed;
    total.confirm.control_errors += r.confirm.control_errors;
    for (std::size_t j = 0; j < r.confirm.rejected.size(); ++j)
      total.confirm.rejected[j] += r.confirm.rejected[j];
    total.links.insert(total.links.end(), r.links.begin(), r.links.end());
    if (total.error.empty()) total.error = r.error;
  }
  print_report(o, total, seconds);
  if (!total.error.empty()) {
    std::fprintf(stderr, "gateway-peer send: %s: %s\n", joined(o.to).c_str(), total.error.c_str());
    return exit_runtime_error;
  }
  if (total.confirm.unconfirmed != 0) {
    std::fprintf(stderr,
                 "gateway-peer send: %llu frame(s) neither confirmed nor rejected at exit\n",
                 static_cast<unsigned long long>(total.confirm.unconfirmed));
    return exit_verify_failed;
  }
  return exit_ok;
}

}  // namespace gatewayd::tools
