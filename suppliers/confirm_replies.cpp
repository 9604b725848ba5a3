#include "suppliers/confirm_replies.hpp"

#include <cassert>
#include <cstring>
#include <utility>

#include "protocol/control_message.hpp"

namespace gatewayd::suppliers {

confirm_replies::confirm_replies(confirm_replies_owner& owner,
                                 std::weak_ptr<protocol::confirm_owner> ledger_owner,
                                 const connection& to, std::size_t bound, supplier_stats& totals,
                                 session_stats& own)
    : owner_(owner),
      to_(to),
      deadline_(to.socket.get_executor()),
      ledger_(protocol::confirm_ledger::make(std::move(ledger_owner), bound + frames_per_read,
                                             &totals.confirm_ledger)),
      bound_(bound),
      totals_(totals),
      own_(own) {}

confirm_replies::~confirm_replies() {
  close();
}

void confirm_replies::close() noexcept {
  if (state_ == state::closed) return;
  enter(state::closed);
  deadline_.cancel();
  // The connection's frames still owed leave the gauge with it; the ledger lives on until its
  // consumers settled them (nobody is told any more).
  totals_.unconfirmed_frames.fetch_sub(static_cast<std::int64_t>(pending_reported_),
                                       std::memory_order_relaxed);
  pending_reported_ = 0;
}

bool confirm_replies::may_enter(state from, state to) noexcept {
  switch (from) {
    case state::idle:
      return to == state::blocked || to == state::failed || to == state::closed;
    case state::blocked:
      return to == state::idle || to == state::failed || to == state::closed;
    case state::failed:
      return to == state::closed;
    case state::closed:
      return false;
  }
  return false;
}

void confirm_replies::enter(state to) noexcept {
  // The table in confirm_replies.hpp; anything else is a bug.
  assert(may_enter(state_, to));
  const state from = std::exchange(state_, to);
  // The deadline runs exactly while bytes wait for room.
  if (to == state::blocked) {
    deadline_.expires_after(to_.timeout);
    deadline_.async_wait(
        [self = owner_.keep_alive(), this](std::error_code ec) { on_deadline(ec); });
  } else if (from == state::blocked) {
    deadline_.cancel();
  }
}

void confirm_replies::flush() {
  if (state_ == state::closed) return;
  const bool more = collect();
  if (state_ == state::idle) write(more);  // else a wait for room is out, or writing failed
}

void confirm_replies::wake() {
  if (state_ == state::closed) return;
  flush();
  owner_.confirms_written();
}

// What the socket does not take waits in the buffer, under the timeout: a supplier that leaves
// its confirms unread is slow.
void confirm_replies::write(bool more) {
  auto wait = asio::socket_base::wait_write;
  if (const auto out = unsent(); !out.empty()) {
    std::error_code ec;
    if (to_.tls) {
      // Through the channel, on this strand like the session's reads. What OpenSSL took is
      // reported as sent; a record it could not finish is finished by the next call, which
      // starts with the same bytes (the buffer's unsent part).
      const iovec piece{const_cast<char*>(out.data()), out.size()};
      sent_ += to_.tls->write_some(std::span<const iovec>(&piece, 1), ec);
      if (ec == asio::error::would_block) wait = to_.tls->wait_for();
    } else {
      sent_ += to_.socket.write_some(asio::buffer(out.data(), out.size()), ec);
    }
    if (ec && ec != asio::error::would_block && ec != asio::error::try_again &&
        ec != asio::error::interrupted) {
      return enter(state::failed);
    }
  }
  if (sent_ == used_) {
    if (state_ == state::blocked) enter(state::idle);
    // The buffer held only part of what settled: the rest now that it is empty.
    if (more) asio::post(to_.socket.get_executor(), [self = owner_.keep_alive(), this] { wake(); });
    return;
  }
  // (What settled beyond the buffer follows once the supplier read some: on_writable.)
  if (state_ == state::idle) enter(state::blocked);
  to_.socket.async_wait(
      wait, [self = owner_.keep_alive(), this](std::error_code ec) { on_writable(ec); });
}

void confirm_replies::on_writable(std::error_code ec) {
  if (state_ != state::blocked) return;  // closed meanwhile
  if (ec) return enter(state::failed);
  const bool more = collect();
  write(more);
  owner_.confirms_written();
}

void confirm_replies::on_deadline(std::error_code ec) {
  // (A deadline that expired as the rest was written and a new wait began is not this wait's.)
  if (ec || state_ != state::blocked || deadline_.expiry() > std::chrono::steady_clock::now())
    return;
  owner_.confirms_unread(used_ - sent_);
}

bool confirm_replies::collect() {
  if (sent_ == used_) {
    sent_ = used_ = 0;
  } else if (sent_ > 0) {
    std::memmove(buf_.data(), buf_.data() + sent_, used_ - sent_);
    used_ -= sent_;
    sent_ = 0;
  }
  // Room for the confirm that follows is always kept; without room for a reject and it, the
  // walk waits for the supplier to read.
  constexpr std::size_t step = protocol::reject_size + protocol::confirm_size;
  if (buf_.size() - used_ < step) return true;
  bool stopped = false;
  const auto confirmed = ledger_->advance([&](std::uint64_t number, protocol::reject_reason why) {
    if (buf_.size() - used_ < step) {
      stopped = true;
      return false;
    }
    used_ += protocol::encode_control({protocol::control_message::kind::reject, number, why},
                                      buf_.data() + used_);
    totals_.rejected_frames[static_cast<std::size_t>(why) - 1].fetch_add(1,
                                                                         std::memory_order_relaxed);
    return true;
  });
  if (confirmed) {
    used_ += protocol::encode_control({protocol::control_message::kind::confirm, *confirmed},
                                      buf_.data() + used_);
    totals_.confirmed_frames.fetch_add(*confirmed - confirmed_, std::memory_order_relaxed);
    confirmed_ = *confirmed;
    own_.confirmed.store(confirmed_, std::memory_order_relaxed);
  }
  publish_pending();
  return stopped;
}

void confirm_replies::publish_pending() noexcept {
  const std::uint64_t now = ledger_->pending();
  totals_.unconfirmed_frames.fetch_add(
      static_cast<std::int64_t>(now) - static_cast<std::int64_t>(pending_reported_),
      std::memory_order_relaxed);
  pending_reported_ = now;
  own_.pending.store(now, std::memory_order_relaxed);
}

}  // namespace gatewayd::suppliers
