// The writer of what a supplier connection that sends CONFIRM frames is owed back: the ledger
// numbering its frames, and the `reject`s and cumulative `confirm` waiting to be written, in a
// small fixed buffer it writes itself. Made on the connection's first CONFIRM frame: plain
// suppliers never have one.
#pragma once

#include <array>
#include <asio.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "net/tls_channel.hpp"
#include "protocol/confirm_ledger.hpp"
#include "protocol/frame_chunk.hpp"
#include "protocol/frame_codec.hpp"
#include "suppliers/supplier_stats.hpp"

namespace gatewayd::suppliers {

// What the replies ask of the connection that owns them, on its strand.
class confirm_replies_owner {
 public:
  // Kept alive by every operation the replies have out.
  virtual std::shared_ptr<void> keep_alive() = 0;
  // The replies wrote on a wake-up of their own (the socket took more, or the rest of what
  // settled went out): what depends on the frames owed may have changed.
  virtual void confirms_written() = 0;
  // `unwritten` bytes stayed unwritten for confirm_timeout: its supplier does not read them.
  virtual void confirms_unread(std::size_t unwritten) = 0;

 protected:
  ~confirm_replies_owner() = default;
};

// The session's strand only (the ledger's entries are settled from any thread).
class confirm_replies {
 public:
  // What the supplier has not read yet is held here, and no more: a supplier that leaves it
  // unread stops being read (its ledger fills), then is closed as slow (confirms_unread()).
  static constexpr std::size_t buffer_bytes = 8 * 1024;
  // Frames one read can bring beyond the bound: the session checks the bound between reads,
  // so the ledger holds this many more, and a frame is never refused its number.
  // (A read fills at most a standard chunk with frames of one byte of address and no payload;
  // a larger chunk holds one large frame and at most min_read more.)
  static constexpr std::size_t frames_per_read =
      protocol::frame_chunk::standard_capacity / (protocol::header_size + 1) + 1;

  // Where the replies go and what bounds them.
  struct connection {
    asio::ip::tcp::socket& socket;      // non-blocking, the owner's (it outlives the replies)
    net::tls_channel* tls;              // null = plaintext; else written through it
    std::chrono::milliseconds timeout;  // confirm_timeout: how long bytes may wait unwritten
  };
  // `bound`: unconfirmed frames (max_unconfirmed_frames) at which the session stops reading.
  // `ledger_owner` is told, from any thread, when frames settle.
  confirm_replies(confirm_replies_owner& owner, std::weak_ptr<protocol::confirm_owner> ledger_owner,
                  const connection& to, std::size_t bound, supplier_stats& totals,
                  session_stats& own);
  ~confirm_replies();
  confirm_replies(const confirm_replies&) = delete;
  confirm_replies& operator=(const confirm_replies&) = delete;

  protocol::confirm_ledger& ledger() noexcept { return *ledger_; }
  // Its own unconfirmed frames reached the bound: read no more until a flush made room. What
  // other connections' ledgers hold never stops this one: max_confirm_ledger_bytes is shared out
  // among the consumers that owe frames (consumers/confirm_share.hpp), whose policies apply.
  bool full() const noexcept { return ledger_->pending() >= bound_; }
  // Every frame numbered is confirmed and the confirm written: the connection owes nothing.
  bool settled() const noexcept { return ledger_->pending() == 0 && sent_ == used_; }
  // What settled goes back to the supplier: encoded into the buffer (the rejects, then the
  // cumulative confirm) and written in one non-blocking write, unless a wait for room is out.
  // What the socket does not take waits for room, under the timeout; what the buffer could not
  // hold follows once it emptied. Those later writes tell the owner (confirms_written()).
  void flush();
  // The connection closes: nothing more is written, and its frames owed leave the gauges (the
  // ledger lives on until its consumers settled them; nobody is told any more).
  void close() noexcept;

 private:
  // Where the writing is. Every change goes through enter(), which asserts this table:
  //   idle    -> blocked (the socket took less than all) | failed | closed
  //   blocked -> idle (the rest was written) | failed | closed
  //   failed  -> closed
  enum class state : std::uint8_t {
    idle,     // everything encoded is written; no wait out
    blocked,  // bytes wait unwritten: a wait for room is out, and the deadline runs
    failed,   // the socket or channel failed a write: nothing more is written (the session's
              // read sees the error and closes)
    closed,
  };
  static bool may_enter(state from, state to) noexcept;
  void enter(state to) noexcept;

  // Walks what settled since the last call into the buffer, as far as it has room. True when
  // settled frames are left for the next call (the buffer was full).
  bool collect();
  // Brings the pending gauges up to date.
  void publish_pending() noexcept;
  // One non-blocking write of what is encoded and unsent, then a wait for room if the socket
  // did not take it all. `more`: collect() left settled frames for a later call.
  void write(bool more);
  std::span<const char> unsent() const noexcept { return {buf_.data() + sent_, used_ - sent_}; }
  void on_writable(std::error_code ec);
  void on_deadline(std::error_code ec);
  // A flush of its own (not the owner's), told to the owner.
  void wake();

  confirm_replies_owner& owner_;
  const connection to_;
  asio::steady_timer deadline_;  // runs while bytes wait unwritten (state blocked)
  state state_ = state::idle;
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
