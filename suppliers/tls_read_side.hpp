// A TLS supplier session's read side: decrypts into the read chunk, and says what the session's
// next wait is for, bounding a wait for room to send.
#pragma once

#include <asio.hpp>
#include <chrono>
#include <memory>
#include <system_error>

#include "net/tls_channel.hpp"

namespace gatewayd::suppliers {

// What the read side asks of the session that owns it, on its strand.
class tls_read_side_owner {
 public:
  // Kept alive by the deadline's timer wait.
  virtual std::shared_ptr<void> keep_alive() = 0;
  // A wait for room to send outlived its deadline: the supplier takes nothing while OpenSSL
  // must send before it reads on (a KeyUpdate's answer). The owner fails it as slow, unless
  // that wait is no longer its own (it closed, or reads again).
  virtual void send_stalled() = 0;

 protected:
  ~tls_read_side_owner() = default;
};

// Three things the next wait can be for: nothing (OpenSSL holds whole records already taken
// off the socket, which the kernel would not wake the session for: read again), the socket's
// readability, or room to send; the last under `deadline` (the handshake timeout). The owner's
// strand only. A plaintext session never reads through it, and never holds records.
class tls_read_side {
 public:
  tls_read_side(const asio::any_io_executor& ex, tls_read_side_owner& owner,
                std::chrono::milliseconds deadline)
      : deadline_(ex), owner_(owner), timeout_(deadline) {}

  // The read seam's TLS half: decrypts into `into`, no copy.
  std::size_t read_some(net::tls_channel& tls, asio::mutable_buffer into, std::error_code& ec) {
    const std::size_t n = tls.read_some(into, ec);
    // Only "would block" proves that OpenSSL holds no bytes the socket no longer shows.
    drained_ = ec == asio::error::would_block || ec == asio::error::try_again;
    // What the read waits for, apart from what a write of confirms waits for (the channel
    // keeps only the last operation's).
    if (drained_) wait_ = tls.wait_for();
    return n;
  }
  // Read again before any wait: the kernel will not wake the session for what OpenSSL holds.
  bool holds_records() const noexcept { return !drained_; }
  // The wait to begin; one for room to send starts the deadline.
  asio::socket_base::wait_type begin_wait();
  // The wait ended, or the session closes: the deadline is off.
  void end_wait() noexcept { deadline_.cancel(); }

 private:
  void on_deadline(std::error_code ec);

  asio::steady_timer deadline_;
  tls_read_side_owner& owner_;
  const std::chrono::milliseconds timeout_;
  bool drained_ = true;  // the last read ended in "would block"
  asio::socket_base::wait_type wait_ = asio::socket_base::wait_read;
};

}  // namespace gatewayd::suppliers
