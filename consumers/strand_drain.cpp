#include "consumers/strand_drain.hpp"

#include "consumers/consumer.hpp"
#include "net/gathered_send.hpp"

namespace gatewayd::consumers {

void strand_drain::start(bool here) {
  if (here) return asio::dispatch(c_.strand_, [self = c_.shared_from_this(), this] { run(); });
  asio::post(c_.strand_, [self = c_.shared_from_this(), this] { run(); });
}

void strand_drain::on_link_up(bool frames_waiting) {
  // Writes are attempted at once and never block the thread: a full socket answers
  // would_block, and the drain then waits for writability on the reactor.
  std::error_code ignored;
  c_.link_.socket().non_blocking(true, ignored);
  if (frames_waiting) run();
}

void strand_drain::run() {
  std::uint64_t turn = 0;
  for (;;) {
    if (batch_.empty() && !next_batch()) return;
    std::error_code ec;
    const std::uint64_t offered = batch_.unwritten_bytes();
    const std::size_t n = write(batch_.unwritten(), ec);
    turn += n;
    c_.count_sent(batch_.written(n));
    // A full socket takes part of a write, then nothing: either way, wait until the kernel
    // says there is room (a third of the buffer) instead of writing it a few KiB at a time,
    // each write waking the reader for a sliver. Nothing taken is not a lost connection.
    if (net::socket_full(ec) || (!ec && n < offered)) {
      c_.socket_refused();
      return wait_writable();
    }
    if (ec) c_.link_.lost(conn_, ec);
    if (ec || !c_.link_.up(conn_)) {
      // Broken, or dropped by the disconnect policy: the frame cut by it and everything after
      // go back to the front of the queue, to be sent whole on the next connection (or away,
      // if the policy fired). The next batch then finds the link down and lets the role go.
      c_.settle_rest(batch_);
      continue;
    }
    if (turn >= turn_bytes && batch_.empty()) {
      asio::post(c_.strand_, [self = c_.shared_from_this(), this] { run(); });
      return;
    }
  }
}

std::size_t strand_drain::write(std::span<const iovec> pieces, std::error_code& ec) {
  if (const auto& tls = c_.link_.secure_stream()) return tls->write_some(pieces, ec);
  return net::gathered_send(c_.link_.socket().native_handle(), pieces, ec);
}

bool strand_drain::next_batch() {
  bool more = false;
  bool caught_up = false;
  {
    std::lock_guard lock(c_.mutex_);
    more = c_.take_batch_locked(batch_, conn_);
    caught_up = !more && c_.connected_;
    if (c_.below_low_water_locked()) c_.paused_.release_locked();
  }
  if (caught_up) c_.caught_up();
  // Nothing to send: a TLS connection gives its staging buffer back while it idles.
  if (!more && c_.link_.secure_stream()) c_.link_.secure_stream()->release_buffers();
  c_.paused_.resume_released();
  if (!more) c_.check_drain();
  return more;
}

void strand_drain::wait_writable() {
  // TLS: whatever OpenSSL's last call waits for (room to send, as a rule).
  const auto& tls = c_.link_.secure_stream();
  c_.link_.socket().async_wait(tls ? tls->wait_for() : asio::ip::tcp::socket::wait_write,
                               [self = c_.shared_from_this(), this](std::error_code ec) {
                                 if (!ec) return run();
                                 if (ec != asio::error::operation_aborted) c_.link_.lost(conn_, ec);
                                 c_.settle_rest(batch_);
                                 if (next_batch()) run();
                               });
}

}  // namespace gatewayd::consumers
