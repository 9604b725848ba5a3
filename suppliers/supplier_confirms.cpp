// A supplier session's CONFIRM frames: numbering them as they are routed, and what the
// session does as its confirm_replies write the `reject`s and the cumulative `confirm` back.
#include "runtime/log.hpp"
#include "suppliers/frame_router.hpp"
#include "suppliers/supplier_session.hpp"

namespace gatewayd::suppliers {

frame_router::outcome supplier_session::route_confirmed(frame_router& router,
                                                        const protocol::frame_view& f,
                                                        const protocol::frame_slice& s, routed& r) {
  if (!replies_) {
    replies_ = std::make_unique<confirm_replies>(
        static_cast<confirm_replies_owner&>(*this),
        std::weak_ptr<protocol::confirm_owner>(
            std::shared_ptr<protocol::confirm_owner>(shared_from_this(), this)),
        confirm_replies::connection{socket_, tls_.get(), ctx_.confirm_timeout},
        ctx_.max_unconfirmed, ctx_.stats, stats_);
  }
  // Consumers always receive flags 0x00: the bit is cleared in the chunk before any consumer
  // holds the frame (its bytes are ours until it is routed).
  protocol::clear_confirm_flag(s.chunk->data() + s.offset);
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
  replies_->flush();
  confirms_written();
}

void supplier_session::confirms_written() {
  if (in(state::closed)) return;
  update_waiting();  // the last confirm owed may have gone out
  if (in(state::confirming) && !replies_->full()) {
    enter(state::reading);
    if (!waiting_) do_wait();
  }
  // The gateway stops: held only while it is owed confirms, and it is owed none any more.
  if (in(state::held) && replies_->settled()) close(partial_discard::shutdown);
}

void supplier_session::confirms_unread(std::size_t unwritten) {
  if (in(state::closed)) return;
  ctx_.stats.closed[static_cast<std::size_t>(close_reason::confirms_unread)].fetch_add(
      1, std::memory_order_relaxed);
  GW_LOG_LIMITED(warning, "supplier confirms unread")
      << "supplier " << peer_ << ": left its confirms unread for " << ctx_.confirm_timeout.count()
      << " ms (" << unwritten << " bytes waiting); closing (confirms_unread)";
  close(partial_discard::confirms_unread);
}

}  // namespace gatewayd::suppliers
