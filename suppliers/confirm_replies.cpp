#include "suppliers/confirm_replies.hpp"

#include <cstring>

#include "protocol/control_message.hpp"

namespace gatewayd::suppliers {

confirm_replies::confirm_replies(std::weak_ptr<protocol::confirm_owner> owner, std::size_t bound,
                                 supplier_stats& totals, session_stats& own,
                                 const asio::any_io_executor& ex)
    : deadline(ex),
      ledger_(protocol::confirm_ledger::make(std::move(owner), bound + frames_per_read,
                                             &totals.confirm_ledger)),
      bound_(bound),
      totals_(totals),
      own_(own) {}

confirm_replies::~confirm_replies() {
  // The connection's frames still owed leave the gauge with it; the ledger lives on until its
  // consumers settled them (nobody is told any more).
  totals_.unconfirmed_frames.fetch_sub(static_cast<std::int64_t>(pending_reported_),
                                       std::memory_order_relaxed);
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

void confirm_replies::sent(std::size_t n) noexcept {
  sent_ += n;
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
