#include "tools/gateway_peer/confirm_sender.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <system_error>

#include "protocol/frame_codec.hpp"
#include "tools/gateway_peer/stop_signal.hpp"
#include "tools/traffic/payload_header.hpp"

namespace gatewayd::tools {
namespace {

constexpr std::uint64_t max_wait_ns = 100'000'000;  // a wait looks at the stop flags this often

// Waits up to `ns` for `events` on `fd`; the events that came (0 on a timeout or a signal).
short wait_for(int fd, short events, std::uint64_t ns) {
  pollfd p{fd, events, 0};
  const timespec ts{static_cast<time_t>(ns / 1'000'000'000u),
                    static_cast<long>(ns % 1'000'000'000u)};
  return ::ppoll(&p, 1, &ts, nullptr) > 0 ? p.revents : 0;
}

std::string errno_message() {
  return std::error_code(errno, std::system_category()).message();
}

}  // namespace

confirm_sender::confirm_sender(const send_options& o, std::uint64_t count, double rate,
                               std::uint64_t deadline_ns, tls_stream* tls)
    : o_(o),
      tls_(tls),
      count_(count),
      rate_(rate),
      deadline_ns_(deadline_ns),
      batch_(o.addresses, o.size, 0, 4096, 256 * 1024, protocol::frame_flags::confirm, o.spread),
      window_(o.window) {}

connection_result confirm_sender::run(traffic::supplier_link& link) {
  // Over TLS the reads and writes go through OpenSSL, which cannot be told MSG_DONTWAIT: the
  // socket itself must not block (the handshake, done before, did).
  if (tls_) {
    const int fd = link.native_handle();
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  open_record(link);
  const std::uint64_t start = traffic::monotonic_ns();
  for (;;) {
    const std::uint64_t now = traffic::monotonic_ns();
    check_end(now);
    if (gave_up_) break;
    if (phase_ == phase::draining && (window_.unsettled() == 0 || out_of_time(now))) break;
    if (ending_ == ending::none && link.connected() && confirms_overdue(now))
      fail(ending::lost, "no confirm within the confirm deadline");
    if (ending_ != ending::none) {
      end_connection(link);
      continue;
    }
    if (!link.connected()) {
      redial(link);  // when it cannot, its stop or deadline moves us on at the top
      continue;
    }
    if (!read_control(link)) continue;
    if (window_.to_resend() != 0) {
      resend_some(link);
      continue;
    }
    if (phase_ == phase::draining || window_.room() == 0) {
      wait_readable(link, now, phase_ == phase::draining ? drain_deadline_ns_ : now + max_wait_ns);
      continue;
    }
    std::size_t n = std::min(batch_.capacity(), window_.room());
    if (count_ != 0) n = static_cast<std::size_t>(std::min<std::uint64_t>(n, count_ - r_.frames));
    if (rate_ > 0) {
      // The plain sender's token bucket, over first sends (resends are not new load).
      const double allowed = rate_ * static_cast<double>(now - start) / 1e9 + 1.0;
      const double tokens = allowed - static_cast<double>(r_.frames);
      if (tokens < 1.0) {
        const auto wait = static_cast<std::uint64_t>((1.0 - tokens) / rate_ * 1e9);
        wait_readable(link, now, now + std::clamp<std::uint64_t>(wait, 1'000, 1'000'000));
        continue;
      }
      n = std::min<std::size_t>(n, static_cast<std::size_t>(tokens));
    }
    send_new(link, n, now);
  }
  if (ending_ != ending::none) {
    end_connection(link);
  } else if (link.connected()) {
    if (tls_) tls_->close_notify();
    link.leave();
  }
  r_.resent = window_.resends();
  r_.confirm.confirmed = window_.confirmed();
  r_.confirm.unconfirmed = window_.unsettled();
  r_.confirm.rejected = window_.rejected_by_reason();
  return std::move(r_);
}

void confirm_sender::open_record(const traffic::supplier_link& link) {
  const std::uint16_t id = next_sender_id();
  batch_.renumber(id);
  window_.new_connection();
  inbox_.clear();
  progress_ns_ = traffic::monotonic_ns();
  r_.links.push_back({link.peer().to_string(), link.local(), id, 0, "stopped"});
}

void confirm_sender::check_end(std::uint64_t now) {
  if (phase_ != phase::sending) return;
  if (stop_requested().load() || (count_ != 0 && r_.frames >= count_) ||
      (deadline_ns_ != 0 && now >= deadline_ns_)) {
    phase_ = phase::draining;
    drain_deadline_ns_ = now + static_cast<std::uint64_t>(o_.confirm_wait * 1e9);
  }
}

bool confirm_sender::out_of_time(std::uint64_t now) const {
  return hard_stop().load() || (drain_deadline_ns_ != 0 && now >= drain_deadline_ns_);
}

bool confirm_sender::confirms_overdue(std::uint64_t now) {
  const std::uint64_t settled = window_.added() - window_.unsettled();
  if (settled != settled_seen_ || window_.unsettled() == 0) {
    settled_seen_ = settled;
    progress_ns_ = std::max(progress_ns_, now);
    return false;
  }
  return o_.confirm_deadline > 0 &&
         now - std::min(progress_ns_, now) >= static_cast<std::uint64_t>(o_.confirm_deadline * 1e9);
}

bool confirm_sender::redial(traffic::supplier_link& link) {
  const bool ok = phase_ == phase::sending ? link.reconnect(stop_requested(), deadline_ns_)
                                           : link.reconnect(hard_stop(), drain_deadline_ns_);
  if (ok) open_record(link);
  return ok;
}

void confirm_sender::end_connection(traffic::supplier_link& link) {
  auto& record = r_.links.back();
  std::string why;
  switch (ending_) {
    case ending::none:
      return;
    case ending::end_of_file:
      // gatewayd's lame-duck stop, or a gateway that died with nothing unread: either way no
      // confirm can come any more on this connection.
      if (link.leave()) {
        record.ended = "asked to leave";
        why = "the gateway asked us to leave (it is stopping)";
      } else {
        record.ended = "lost: reset after end-of-file";
        why = "connection lost: reset after end-of-file";
      }
      break;
    case ending::lost:
      link.drop();
      record.ended = "lost: " + why_;
      why = "connection lost: " + why_;
      break;
    case ending::bad_control:
      link.drop();
      ++r_.confirm.control_errors;
      record.ended = "bad control frame: " + why_;
      why = "the gateway sent a bad control frame: " + why_;
      std::fprintf(stderr, "gateway-peer send: %s: bad control frame (%s): connection dropped\n",
                   record.to.c_str(), why_.c_str());
      break;
    case ending::cut:  // the end came while a write waited: not an error, what is left counts
      link.drop();
      record.ended = "stopped: " + why_;
      ending_ = ending::none;
      return;
  }
  ending_ = ending::none;
  if (!o_.reconnect) {
    r_.error = why;
    gave_up_ = true;
  }
}

bool confirm_sender::read_control(traffic::supplier_link& link) {
  if (ending_ != ending::none) return false;
  for (;;) {
    const auto space = inbox_.prepare();
    const ssize_t n = receive(link, space.data, space.size);
    if (n > 0) {
      inbox_.commit(static_cast<std::size_t>(n));
      const std::string_view fault = inbox_.parse([&](const protocol::control_message& m) {
        const auto f = window_.on_message(m);
        return f == traffic::confirm_fault::none ? std::string_view{} : traffic::to_string(f);
      });
      if (!fault.empty()) {
        fail(ending::bad_control, std::string(fault));
        return false;
      }
      continue;
    }
    if (n == 0) {
      fail(ending::end_of_file, {});
      return false;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
    fail(ending::lost, errno_message());
    return false;
  }
}

void confirm_sender::wait_readable(traffic::supplier_link& link, std::uint64_t now,
                                   std::uint64_t until_ns) {
  const std::uint64_t ns = until_ns > now ? std::min(until_ns - now, max_wait_ns) : 0;
  if (wait_for(link.native_handle(), POLLIN, ns) != 0) read_control(link);
}

ssize_t confirm_sender::receive(traffic::supplier_link& link, void* buffer, std::size_t size) {
  return tls_ ? tls_->read(buffer, size) : link.receive(buffer, size);
}

bool confirm_sender::keep_waiting() {
  const std::uint64_t now = traffic::monotonic_ns();
  check_end(now);
  if (out_of_time(now)) {
    fail(ending::cut, "a write still waited when the time was up");
    return false;
  }
  if (ending_ == ending::none && confirms_overdue(now)) {
    fail(ending::lost, "no confirm within the confirm deadline (a write waited)");
    return false;
  }
  return true;
}

bool confirm_sender::write_tls(traffic::supplier_link& link, std::string_view bytes) {
  const int fd = link.native_handle();
  std::size_t done = 0;  // handed to OpenSSL; once all is, what is left is flushing its records
  for (;;) {
    std::size_t taken = 0;
    const auto step =
        done < bytes.size() ? tls_->put_some(bytes.substr(done), taken) : tls_->flush();
    if (step == tls_stream::step::failed) {
      fail(ending::lost, tls_->error());
      return false;
    }
    done += taken;
    if (step == tls_stream::step::done) {
      if (done == bytes.size() && taken == 0) return true;  // the flush went through
      continue;
    }
    // The socket is full: read the gateway's confirms meanwhile (it may wait for room on our
    // side to send them), then push the records OpenSSL holds and go on.
    if (!keep_waiting()) return false;
    const short got = wait_for(fd, POLLIN | POLLOUT, max_wait_ns);
    if ((got & POLLIN) && !read_control(link)) return false;
    if (done < bytes.size() && tls_->flush() == tls_stream::step::failed) {
      fail(ending::lost, tls_->error());
      return false;
    }
  }
}

bool confirm_sender::write(traffic::supplier_link& link, std::string_view bytes) {
  if (tls_) return write_tls(link, bytes);
  const int fd = link.native_handle();
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w =
        ::send(fd, bytes.data() + done, bytes.size() - done, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w > 0) {
      done += static_cast<std::size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // The gateway does not read now: read its confirms meanwhile (it may be waiting for
      // room on our side to send them), and look at the end and the stop flags.
      if (!keep_waiting()) return false;
      // After its end-of-file a gateway that stops still reads: the write goes on.
      const bool readable = ending_ == ending::none;
      const short got = wait_for(fd, readable ? POLLIN | POLLOUT : POLLOUT, max_wait_ns);
      if (readable && (got & POLLIN) && !read_control(link) && ending_ != ending::end_of_file)
        return false;
      continue;
    }
    fail(ending::lost, w == 0 ? std::string("connection reset") : errno_message());
    return false;
  }
  return true;
}

void confirm_sender::send_new(traffic::supplier_link& link, std::size_t n, std::uint64_t now) {
  // Into the window before the write: a confirm read while it waits may already cover them.
  const std::uint64_t first = batch_.stamped_total();
  for (std::size_t i = 0; i < n; ++i)
    window_.add(batch_.header_of(first + i, now));
  const auto bytes = batch_.next(n, now);
  r_.frames += n;
  r_.bytes += bytes.size();
  r_.links.back().frames += n;
  write(link, bytes);
}

void confirm_sender::resend_some(traffic::supplier_link& link) {
  const std::size_t n = std::min(window_.to_resend(), batch_.capacity());
  resend_bytes_.clear();
  for (std::size_t i = 0; i < n; ++i)
    batch_.append_frame(resend_bytes_, window_.resend_at(i));
  window_.resent(n);
  r_.links.back().frames += n;
  write(link, resend_bytes_);
}

}  // namespace gatewayd::tools
