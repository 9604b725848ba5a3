#include "consumers/strand_drain.hpp"

#include "net/gathered_send.hpp"

namespace gatewayd::consumers {

void strand_drain::start(bool here) {
  auto go = [self = source_.keep_alive(), this] { run(); };
  if (here) return asio::dispatch(strand_, std::move(go));
  asio::post(strand_, std::move(go));
}

void strand_drain::on_link_up(bool frames_waiting) {
  // Writes are attempted at once and never block the thread: a full socket answers
  // would_block, and the drain then waits for writability on the reactor.
  std::error_code ignored;
  link_.socket().non_blocking(true, ignored);
  if (frames_waiting) run();
}

void strand_drain::run() {
  std::uint64_t turn = 0;
  for (;;) {
    if (batch_.empty() && !source_.take_batch(batch_, conn_)) return;
    std::error_code ec;
    const std::uint64_t offered = batch_.unwritten_bytes();
    const std::size_t n = write(batch_.unwritten(), ec);
    turn += n;
    source_.batch_sent(batch_, n);
    // A full socket takes part of a write, then nothing: either way, wait until the kernel
    // says there is room (a third of the buffer) instead of writing it a few KiB at a time,
    // each write waking the reader for a sliver. Nothing taken is not a lost connection.
    if (net::socket_full(ec) || (!ec && n < offered)) {
      source_.batch_refused();
      return wait_writable();
    }
    if (ec) link_.lost(conn_, ec);
    if (ec || !link_.up(conn_)) {
      // Broken, or dropped by the disconnect policy: the frame cut by it and everything after
      // go back to the front of the queue, to be sent whole on the next connection (or away,
      // if the policy fired). The next batch then finds the link down and lets the role go.
      source_.batch_failed(batch_);
      continue;
    }
    if (turn >= turn_bytes && batch_.empty()) {
      asio::post(strand_, [self = source_.keep_alive(), this] { run(); });
      return;
    }
  }
}

std::size_t strand_drain::write(std::span<const iovec> pieces, std::error_code& ec) {
  if (const auto& tls = link_.secure_stream()) return tls->write_some(pieces, ec);
  return net::gathered_send(link_.socket().native_handle(), pieces, ec);
}

void strand_drain::wait_writable() {
  // TLS: whatever OpenSSL's last call waits for (room to send, as a rule).
  const auto& tls = link_.secure_stream();
  link_.socket().async_wait(tls ? tls->wait_for() : asio::ip::tcp::socket::wait_write,
                            [self = source_.keep_alive(), this](std::error_code ec) {
                              if (!ec) return run();
                              if (ec != asio::error::operation_aborted) link_.lost(conn_, ec);
                              source_.batch_failed(batch_);
                              if (source_.take_batch(batch_, conn_)) run();
                            });
}

}  // namespace gatewayd::consumers
