// A supplier session's CONFIRM frames: numbering them as they are routed, and writing the
// `reject`s and the cumulative `confirm` back on the session's strand.
#include <sys/socket.h>

#include <cerrno>

#include "runtime/log.hpp"
#include "suppliers/frame_router.hpp"
#include "suppliers/supplier_session.hpp"

namespace gatewayd::suppliers {

frame_router::outcome supplier_session::route_confirmed(frame_router& router,
                                                        const protocol::frame_view& f,
                                                        const protocol::frame_slice& s, routed& r) {
  if (!replies_) {
    replies_ = std::make_unique<confirm_replies>(
        std::weak_ptr<protocol::confirm_owner>(
            std::shared_ptr<protocol::confirm_owner>(shared_from_this(), this)),
        ctx_.max_unconfirmed, ctx_.stats, stats_, socket_.get_executor());
  }
  // Consumers always receive flags 0x00: the bit is cleared in the chunk before any consumer
  // holds the frame (its bytes are ours until it is routed).
  s.chunk->data()[s.offset + 3] = static_cast<char>(protocol::frame_flags::data);
  bool numbered = true;
  const auto outcome = router.route_confirmed(f.address, s, replies_->ledger(), numbered);
  if (!numbered) r.end = pass_end::unnumbered;
  return outcome;
}

void supplier_session::confirms_settled() noexcept {
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->flush_confirms(); });
}

void supplier_session::flush_confirms() {
  if (!replies_ || in(state::closed)) return;
  const bool more = replies_->collect();
  write_confirms();
  if (in(state::closed)) return;
  update_waiting();  // the last confirm owed may have gone out
  // The buffer held only part of what settled: the rest after the supplier read some (the
  // wait for room calls again), or at once if the write emptied it.
  if (more && !replies_->write_waiting && replies_->unsent().empty()) {
    asio::post(socket_.get_executor(), [self = shared_from_this()] { self->flush_confirms(); });
  }
  if (in(state::confirming) && !replies_->full()) {
    enter(state::reading);
    if (!waiting_) do_wait();
  }
  // The gateway stops: held only while it is owed confirms, and it is owed none any more.
  if (in(state::held) && replies_->settled()) close(partial_discard::shutdown);
}

// One non-blocking write of everything encoded. What the socket does not take waits in the
// buffer, under confirm_timeout: a supplier that leaves its confirms unread is slow.
void supplier_session::write_confirms() {
  const auto out = replies_->unsent();
  if (out.empty() || replies_->write_waiting) return;
  auto wait = asio::socket_base::wait_write;
  if (tls_) {
    // Through the channel, on this strand like its reads. What OpenSSL took is reported as
    // sent; a record it could not finish is finished by the next call, which starts with
    // the same bytes (the buffer's unsent part).
    std::error_code ec;
    const iovec piece{const_cast<char*>(out.data()), out.size()};
    replies_->sent(tls_->write_some(std::span<const iovec>(&piece, 1), ec));
    if (ec && ec != asio::error::would_block) return;  // failing: its read sees it and closes
    if (ec) wait = tls_->wait_for();
  } else {
    const ssize_t n =
        ::send(socket_.native_handle(), out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) replies_->sent(static_cast<std::size_t>(n));
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return;  // the connection is failing: its read (or its pause check) sees it and closes
    }
  }
  if (replies_->unsent().empty()) {
    if (replies_->deadline_armed) {
      replies_->deadline_armed = false;
      replies_->deadline.cancel();
    }
    return;
  }
  if (!replies_->deadline_armed) {
    replies_->deadline_armed = true;
    replies_->deadline.expires_after(ctx_.confirm_timeout);
    replies_->deadline.async_wait(
        [self = shared_from_this()](std::error_code ec) { self->on_confirm_deadline(ec); });
  }
  replies_->write_waiting = true;
  socket_.async_wait(wait, [self = shared_from_this()](std::error_code ec) {
    // Closed meanwhile: the replies went with the connection.
    if (self->in(state::closed) || !self->replies_) return;
    self->replies_->write_waiting = false;
    if (ec) return;
    self->flush_confirms();
  });
}

void supplier_session::on_confirm_deadline(std::error_code ec) {
  if (ec || in(state::closed) || !replies_ || !replies_->deadline_armed) return;
  replies_->deadline_armed = false;
  if (!replies_ || replies_->unsent().empty()) return;
  ctx_.stats.closed[static_cast<std::size_t>(close_reason::confirms_unread)].fetch_add(
      1, std::memory_order_relaxed);
  GW_LOG_LIMITED(warning, "supplier confirms unread")
      << "supplier " << peer_ << ": left its confirms unread for " << ctx_.confirm_timeout.count()
      << " ms (" << replies_->unsent().size() << " bytes waiting); closing (confirms_unread)";
  close(partial_discard::confirms_unread);
}

}  // namespace gatewayd::suppliers
