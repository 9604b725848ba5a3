// What a supplier connection that sends CONFIRM frames is owed back: the ledger numbering its
// frames, and the `reject`s and cumulative `confirm` waiting to be written, in a small fixed
// buffer. Made on the connection's first CONFIRM frame: plain suppliers never have one.
#pragma once

#include <array>
#include <asio.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "protocol/confirm_ledger.hpp"
#include "protocol/frame_chunk.hpp"
#include "protocol/frame_codec.hpp"
#include "suppliers/supplier_stats.hpp"

namespace gatewayd::suppliers {

// Session's strand only (the ledger's entries are settled from any thread).
class confirm_replies {
 public:
  // What the supplier has not read yet is held here, and no more: a supplier that leaves it
  // unread stops being read (its ledger fills), then is closed as slow (the session's deadline).
  static constexpr std::size_t buffer_bytes = 8 * 1024;
  // Frames one read can bring beyond the bound: the session checks the bound between reads,
  // so the ledger holds this many more, and a frame is never refused its number.
  // (A read fills at most a standard chunk with frames of one byte of address and no payload;
  // a larger chunk holds one large frame and at most min_read more.)
  static constexpr std::size_t frames_per_read =
      protocol::frame_chunk::standard_capacity / (protocol::header_size + 1) + 1;

  // `bound`: unconfirmed frames (max_unconfirmed_frames) at which the session stops reading.
  confirm_replies(std::weak_ptr<protocol::confirm_owner> owner, std::size_t bound,
                  supplier_stats& totals, session_stats& own, const asio::any_io_executor& ex);
  ~confirm_replies();
  confirm_replies(const confirm_replies&) = delete;
  confirm_replies& operator=(const confirm_replies&) = delete;

  protocol::confirm_ledger& ledger() noexcept { return *ledger_; }
  // Unconfirmed frames reached the bound, or all ledgers together max_confirm_ledger_bytes: read
  // no more until collect() (or the other ledgers) made room.
  bool full() const noexcept {
    return ledger_->pending() >= bound_ || totals_.confirm_ledger.full();
  }
  bool over_ledger_budget() const noexcept { return totals_.confirm_ledger.full(); }
  // Every frame numbered is confirmed and the confirm written: the connection owes nothing.
  bool settled() const noexcept { return ledger_->pending() == 0 && sent_ == used_; }

  // Walks what settled since the last call into the buffer (the rejects, then the cumulative
  // confirm), as far as the buffer has room. True when settled frames are left for the next
  // call (the buffer was full).
  bool collect();
  // What is encoded and not yet written, and how much of it the socket took.
  std::span<const char> unsent() const noexcept { return {buf_.data() + sent_, used_ - sent_}; }
  void sent(std::size_t n) noexcept;
  // Brings the pending gauges up to date (after numbering frames, after collect()).
  void publish_pending() noexcept;

  // The session's write of them (supplier_confirms.cpp): the deadline runs while bytes wait
  // unwritten; a wait for room to write is out.
  asio::steady_timer deadline;
  bool deadline_armed = false;
  bool write_waiting = false;

 private:
  protocol::confirm_ledger_ptr ledger_;
  const std::size_t bound_;
  supplier_stats& totals_;
  session_stats& own_;
  std::uint64_t confirmed_ = 0;         // the last confirm encoded
  std::uint64_t pending_reported_ = 0;  // what totals_.unconfirmed_frames holds of ours
  std::size_t sent_ = 0;                // buf_[sent_, used_) is not written yet
  std::size_t used_ = 0;
  std::array<char, buffer_bytes> buf_;
};

}  // namespace gatewayd::suppliers
