#include "consumers/mutex_drain.hpp"

#include <sys/socket.h>

#include <chrono>

#include "consumers/consumer.hpp"
#include "net/gathered_send.hpp"

namespace gatewayd::consumers {
namespace {

std::uint64_t nanoseconds_since(std::chrono::steady_clock::time_point t0) noexcept {
  return static_cast<std::uint64_t>((std::chrono::steady_clock::now() - t0).count());
}

}  // namespace

void mutex_drain::start(bool /*here*/) {
  std::unique_lock writer(writer_, std::try_to_lock);
  if (!writer.owns_lock()) {
    const auto t0 = std::chrono::steady_clock::now();
    writer.lock();
    c_.stats_.blocked_lock_ns.fetch_add(nanoseconds_since(t0), std::memory_order_relaxed);
  }
  std::uint64_t conn = 0;
  std::uint64_t write_ns = 0;
  bool tell_strand = false;  // suppliers to resume or a drain to finish: strand business
  for (;;) {
    bool more = false;
    {
      std::lock_guard lock(c_.mutex_);
      more = c_.take_batch_locked(batch_, conn);
      tell_strand =
          !more && (c_.closing_ || (!c_.paused_.empty_locked() && c_.below_low_water_locked()));
    }
    if (!more) break;
    std::error_code ec;
    const auto t0 = std::chrono::steady_clock::now();
    // Blocks until the kernel took it all (waiting for writability on a full buffer), or
    // fails when the strand shuts the socket down (release_socket).
    const std::size_t n =
        net::gathered_send_all(c_.link_.socket().native_handle(), batch_.unwritten(), ec);
    write_ns += nanoseconds_since(t0);
    c_.count_sent(batch_.written(n));
    c_.settle_rest(batch_);
    if (ec) {
      {
        std::lock_guard lock(c_.mutex_);
        c_.writing_ = false;
      }
      asio::post(c_.strand_, [self = c_.shared_from_this(), conn, ec] {
        self->link_.lost(conn, ec);
        self->check_drain();
      });
      break;
    }
  }
  writer.unlock();
  if (write_ns) c_.stats_.blocked_write_ns.fetch_add(write_ns, std::memory_order_relaxed);
  if (tell_strand) {
    asio::post(c_.strand_, [self = c_.shared_from_this()] {
      self->resume_if_below_low_water();
      self->check_drain();
    });
  }
}

void mutex_drain::on_link_up(bool frames_waiting) {
  if (!frames_waiting) return;
  asio::post(c_.strand_.get_inner_executor(),
             [self = c_.shared_from_this(), this] { start(true); });
}

void mutex_drain::release_socket() {
  auto& socket = c_.link_.socket();
  if (!socket.is_open()) return;
  ::shutdown(socket.native_handle(), SHUT_RDWR);
  std::lock_guard writer(writer_);
}

}  // namespace gatewayd::consumers
