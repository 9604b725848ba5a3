// The CONFIRM frames of one supplier connection not settled yet: each one's number, how many of
// the consumers it was routed to still owe it, and the first reason it was rejected for. Any
// consumer's thread settles an entry; the connection's own strand turns the settled prefix into
// the cumulative `confirm N` and the `reject`s before it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "protocol/control_message.hpp"

namespace gatewayd::protocol {

class confirm_ledger;

// What the ledger tells its owner (the supplier session), from whichever thread settled the
// last owing frame: post the flush to your own strand. Called at most once per flush.
class confirm_owner {
 public:
  virtual void confirms_settled() noexcept = 0;

 protected:
  ~confirm_owner() = default;
};

// One CONFIRM frame's place in its ledger: what every queued slice of the frame points to.
// Stable in memory until it is settled and its ledger has moved past it.
class confirm_entry {
 public:
  // One consumer is done with the frame: it has it (handed to its socket, or acknowledged by an
  // `ack = true` consumer), or it could not have it (`why`; the first reason stands). The last
  // consumer to settle lets the ledger know. Any thread; each consumer settles once.
  void delivered() noexcept { settle(); }
  void rejected(reject_reason why) noexcept;

 private:
  friend class confirm_ledger;
  void settle() noexcept;

  confirm_ledger* ledger_ = nullptr;
  std::atomic<std::uint32_t> owing_{0};
  std::atomic<std::uint8_t> reason_{0};  // 0 = none, else the reject_reason
};

// The owner's handle on its ledger (below): dropping it lets the ledger go once every frame it
// numbered has been settled, as consumers may still settle those of a connection that closed.
struct confirm_ledger_release {
  void operator()(confirm_ledger* l) const noexcept;
};
using confirm_ledger_ptr = std::unique_ptr<confirm_ledger, confirm_ledger_release>;

class confirm_ledger {
 public:
  // Entries live in blocks of this many, allocated as frames come and freed as the cumulative
  // confirm passes them: a block, not the ledger, is what a frame's slices point into.
  static constexpr std::size_t block_entries = 1024;

  // `capacity`: unsettled frames held at most (add() refuses the next); the owner is told of
  // settlements through `owner` while it lives.
  static confirm_ledger_ptr make(std::weak_ptr<confirm_owner> owner, std::size_t capacity);
  confirm_ledger(const confirm_ledger&) = delete;
  confirm_ledger& operator=(const confirm_ledger&) = delete;

  // Owner's strand: numbers the next CONFIRM frame. Routed to `consumers` consumers, each of
  // which settles it once; with none, it is settled now as `why` (unroutable, not permitted:
  // it must be rejected, and has no consumer to do it). Null when `capacity` frames are
  // unsettled: the owner stops reading until advance() made room.
  confirm_entry* add(std::uint32_t consumers, reject_reason why = reject_reason::unroutable);

  // Owner's strand, after confirms_settled() and after routing frames it added settled (no
  // consumer): walks the settled prefix in order, calling
  // `on_reject(number, reason)` for each rejected frame, and returns the new cumulative
  // confirm (every frame numbered up to it is settled), or nothing when it did not move.
  // An `on_reject` that returns bool may answer false (no room for the reject): the walk stops
  // before that frame, and the owner calls advance() again once it has room.
  template <class OnReject>
  std::optional<std::uint64_t> advance(OnReject&& on_reject);

  // Numbered and not yet passed by the cumulative confirm (settled or not).
  std::uint64_t pending() const noexcept { return next_ - first_; }
  // The highest number confirmed so far (0: none).
  std::uint64_t confirmed() const noexcept { return first_ - 1; }

 private:
  friend class confirm_entry;
  friend struct confirm_ledger_release;
  struct block {
    confirm_entry entries[block_entries];
  };

  confirm_ledger(std::weak_ptr<confirm_owner> owner, std::size_t capacity)
      : owner_(std::move(owner)), capacity_(capacity) {}
  ~confirm_ledger() = default;
  confirm_entry& at(std::uint64_t number) noexcept;
  // An entry's last consumer settled it (any thread): the owner is told, once per flush.
  void entry_settled() noexcept;
  // One holder less (the owner's handle, or a frame still owed); the last deletes the ledger.
  void release() noexcept;

  std::weak_ptr<confirm_owner> owner_;
  const std::size_t capacity_;
  // Owner's strand only: the numbers in the blocks run from first_ (the oldest not yet
  // confirmed) to next_ (the next to give); blocks_.front() holds first_.
  std::deque<std::unique_ptr<block>> blocks_;
  std::uint64_t first_ = 1;
  std::uint64_t next_ = 1;
  std::uint64_t base_ = 1;  // the number of blocks_.front()->entries[0]
  std::atomic<bool> flush_due_{false};
  // The owner's handle, and one per frame still owed by a consumer (its last settler lets go):
  // a reference per frame, not per frame and consumer.
  std::atomic<std::uint64_t> holders_{1};
};

template <class OnReject>
std::optional<std::uint64_t> confirm_ledger::advance(OnReject&& on_reject) {
  // Taken before the walk: a settler that finds the flag already set (and so does not wake the
  // owner again) settled before this exchange, and the walk below sees its settlement.
  flush_due_.exchange(false, std::memory_order_acq_rel);
  const std::uint64_t from = first_;
  while (first_ < next_) {
    confirm_entry& e = at(first_);
    if (e.owing_.load(std::memory_order_acquire) != 0) break;
    if (const auto r = e.reason_.load(std::memory_order_relaxed)) {
      if constexpr (std::is_same_v<std::invoke_result_t<OnReject&, std::uint64_t, reject_reason>,
                                   bool>) {
        if (!on_reject(first_, static_cast<reject_reason>(r))) break;
      } else {
        on_reject(first_, static_cast<reject_reason>(r));
      }
    }
    ++first_;
    if (first_ - base_ == block_entries) {
      blocks_.pop_front();
      base_ += block_entries;
    }
  }
  if (first_ == from) return std::nullopt;
  return first_ - 1;
}

}  // namespace gatewayd::protocol
