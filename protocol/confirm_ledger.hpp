// The CONFIRM frames of one supplier connection not settled yet: each routed one's number, how
// many of the consumers it was routed to still owe it, and the first reason it was rejected for;
// the numbers of frames settled as they were read (rejected, owed by nobody) as runs. Any
// consumer's thread settles an entry; the connection's own strand turns what settled into the
// `reject`s and the cumulative `confirm N`.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "protocol/control_message.hpp"
#include "runtime/byte_budget.hpp"

namespace gatewayd::protocol {

class confirm_ledger;
struct confirm_block;

// What the ledger tells its owner (the supplier session), from whichever thread settled the
// last owing frame: post the flush to your own strand. Called at most once per flush.
class confirm_owner {
 public:
  virtual void confirms_settled() noexcept = 0;

 protected:
  ~confirm_owner() = default;
};

// How a consumer that gives a frame up leaves its entry: rejected for a reason (the supplier
// is told, and does not send it again), or, with none, unsettled: the gateway stops (a stop
// never rejects), no confirm ever covers the frame, and its supplier resends it elsewhere.
using give_up = std::optional<reject_reason>;

// One routed CONFIRM frame's place in its ledger: what every queued slice of the frame points
// to. Stable in memory until every consumer settled it.
class confirm_entry {
 public:
  // One consumer is done with the frame: it has it (handed to its socket, or acknowledged by an
  // `ack = true` consumer), or it could not have it (`why`; the first reason stands), or it
  // leaves it unsettled (the gateway stops). The last consumer to settle lets the ledger know.
  // Any thread; each consumer settles once.
  void delivered() noexcept { settle(); }
  void rejected(reject_reason why) noexcept {
    mark_rejected(why);
    settle();
  }
  void left_unsettled() noexcept {
    mark_unsettled();
    settle();
  }
  void given_up(give_up why) noexcept {
    mark(why);
    settle();
  }

 private:
  friend class confirm_ledger;
  friend class confirm_settlements;
  // Beside the first reason: a consumer left it unsettled, so no confirm may ever cover it.
  static constexpr std::uint8_t unsettled_bit = 0x80;
  void mark_rejected(reject_reason why) noexcept;
  void mark_unsettled() noexcept;
  void mark(give_up why) noexcept { why ? mark_rejected(*why) : mark_unsettled(); }
  // One consumer less owes it: its block, whose hold the caller now has to give back after
  // telling the ledger, when that was the last; null otherwise.
  confirm_block* settle_one() noexcept {
    // Read before the decrement: once it reaches zero the owner may move past this entry, and
    // only this settler's hold keeps the block (and through it the ledger) alive.
    confirm_block* const block = block_;
    return owing_.fetch_sub(1, std::memory_order_acq_rel) == 1 ? block : nullptr;
  }
  void settle() noexcept;

  // No number: the ledger knows it from the entry's place (what a closed connection keeps per
  // owed frame is this, 16 bytes, and its share of a small block).
  confirm_block* block_ = nullptr;
  std::atomic<std::uint32_t> owing_{0};
  std::atomic<std::uint8_t> reason_{0};  // 0 = none, else the reject_reason, | unsettled_bit
};

// The owner's handle on its ledger (below): dropping it frees at once the ledger and every block
// of entries nobody owes; a block with an entry still owed lives until its last one is settled,
// and the ledger's anchor until its last block.
struct confirm_ledger_release {
  void operator()(confirm_ledger* l) const noexcept;
};
using confirm_ledger_ptr = std::unique_ptr<confirm_ledger, confirm_ledger_release>;

// Entries live in blocks, allocated as routed frames come and freed once nobody owes any of
// their entries and the owner is past them (or gone). A ledger's first block holds one entry,
// each next one twice as many, up to this many: a connection that sends a few CONFIRM frames and
// closes keeps a few bytes per frame still owed, one that sends many pays one allocation per
// 64 frames (docs/protocol.md has the figures).
inline constexpr std::size_t confirm_block_entries = 64;

// What a ledger's blocks share with it, and keep after it (its connection) is gone: whom to tell
// of settlements (nobody, once closed) and where the bytes are counted. Held by the ledger and by
// each of its blocks alive; the last holder frees it. 32 bytes.
struct confirm_anchor {
  std::atomic<std::uint32_t> holders{1};
  std::atomic<bool> flush_due{false};

 private:
  std::atomic_flag owner_locked_;  // owner_'s lock (below), here where it costs no padding

 public:
  runtime::byte_budget* budget = nullptr;

  // Sets the owner (the ledger's constructor), or empties it when the ledger closes: a closed
  // connection's session is let go whole (a weak reference would keep a make_shared session's
  // memory allocated).
  void set_owner(std::weak_ptr<confirm_owner> to) noexcept;
  // An entry's last consumer settled it (any thread): the owner is told, once per flush.
  void entry_settled() noexcept;
  void charge(std::int64_t bytes) noexcept;
  void release() noexcept;

 private:
  // The owner, behind a one-bit lock (owner_locked_), taken once per flush and once at each end,
  // each time for one weak_ptr copy or swap. std::atomic<std::weak_ptr> did this, but libstdc++
  // 12's load() unlocks with a relaxed store: its read of the pointer is not ordered before the
  // next store's write, a data race by the standard that TSan reports (confirm_ledger_test under
  // TSan; google/sanitizers#1558). A std::mutex would not fit the 32 bytes a closed connection's
  // anchor may cost.
  std::weak_ptr<confirm_owner> owner_;
  void lock_owner() noexcept;
  void unlock_owner() noexcept;
};

// Each block holds its anchor (one of its holders) and is held by the ledger's list while the
// owner has it, and by each of its entries still owed: the last holder frees it. The entries'
// holds are all taken when the block is made, so numbering a frame costs no atomic operation;
// the holds of entries never numbered go with the list's (confirm_ledger::close()). Its
// `capacity` entries follow it in the same allocation.
struct confirm_block {
  confirm_anchor* anchor = nullptr;
  std::atomic<std::uint32_t> holders{0};
  std::uint32_t capacity = 0;

  // A block of `capacity` entries, all held, and what it costs.
  static confirm_block* make(confirm_anchor* anchor, std::uint32_t capacity);
  static constexpr std::size_t bytes_for(std::size_t capacity) noexcept;
  confirm_entry& entry(std::size_t i) noexcept {
    return reinterpret_cast<confirm_entry*>(this + 1)[i];
  }

  void release(std::uint32_t n = 1) noexcept;
  // `n` of its entries were settled by their last consumers: tells the ledger, then gives back
  // their holds (in that order: the block keeps the anchor alive).
  void settled(std::uint32_t n) noexcept;
};

constexpr std::size_t confirm_block::bytes_for(std::size_t capacity) noexcept {
  return sizeof(confirm_block) + capacity * sizeof(confirm_entry);
}

// Settles the entries of a run of slices (one consumer's written batch) and tells their ledgers
// and gives back their blocks' holds by runs: consecutive entries of one block cost one wake-up
// check and one atomic release, not one each. Flushed when destroyed. One thread.
class confirm_settlements {
 public:
  confirm_settlements() = default;
  confirm_settlements(const confirm_settlements&) = delete;
  confirm_settlements& operator=(const confirm_settlements&) = delete;
  ~confirm_settlements() { flush(); }

  void delivered(confirm_entry& e) noexcept { add(e.settle_one()); }
  void given_up(confirm_entry& e, give_up why) noexcept {
    e.mark(why);
    add(e.settle_one());
  }
  void flush() noexcept;

 private:
  void add(confirm_block* settled) noexcept {
    if (!settled) return;
    if (settled != block_) {
      flush();
      block_ = settled;
    }
    ++count_;
  }

  confirm_block* block_ = nullptr;  // whose last owing entries were settled here, count_ of them
  std::uint32_t count_ = 0;
};

class confirm_ledger {
 public:
  static constexpr std::size_t block_entries = confirm_block_entries;
  // What a ledger costs the budget while its connection is open (itself and its anchor), what a
  // closed one keeps beside its blocks (its anchor), and a block of `entries`.
  static std::size_t ledger_bytes() noexcept;
  static constexpr std::size_t closed_bytes() noexcept { return sizeof(confirm_anchor); }
  static constexpr std::size_t block_bytes(std::size_t entries) noexcept {
    return confirm_block::bytes_for(entries);
  }

  // `capacity`: numbers unconfirmed at most (add() and reject_at_read() refuse the next); the
  // owner is told of settlements through `owner` while it lives; what the ledger holds counts in
  // `budget` (null: nowhere).
  static confirm_ledger_ptr make(std::weak_ptr<confirm_owner> owner, std::size_t capacity,
                                 runtime::byte_budget* budget = nullptr);
  confirm_ledger(const confirm_ledger&) = delete;
  confirm_ledger& operator=(const confirm_ledger&) = delete;

  // Owner's strand: numbers the next CONFIRM frame, routed to `consumers` (>= 1) consumers, each
  // of which settles it once. Null when `capacity` numbers are unconfirmed: the owner stops
  // reading until advance() made room.
  confirm_entry* add(std::uint32_t consumers) {
    if (pending() >= capacity_) return nullptr;
    if (blocks_.empty() || back_used_ == blocks_.back()->capacity) add_block();
    confirm_entry& e = blocks_.back()->entry(back_used_++);
    ++next_seq_;
    ++next_number_;
    e.block_ = blocks_.back();
    e.reason_.store(0, std::memory_order_relaxed);
    // The entry holds its block (a hold taken with the block) until its last consumer settled it.
    e.owing_.store(consumers, std::memory_order_relaxed);
    return &e;
  }
  // Owner's strand: numbers the next CONFIRM frame, settled as it is read (`why`: unroutable, not
  // permitted): no entry, its reject goes out at the next advance() whatever is owed before it.
  // False when `capacity` numbers are unconfirmed.
  bool reject_at_read(reject_reason why);

  // Owner's strand, after confirms_settled() and after frames were rejected at read: calls
  // `on_reject(number, reason)` first for each frame rejected at read, then for each rejected
  // one of the settled prefix of the entries, in order, and returns the new cumulative confirm
  // (every frame numbered up to it is settled and its reject, if any, was given out), or nothing
  // when it did not move. A frame left unsettled stops the confirm for good. An `on_reject` that
  // returns bool may answer false (no room for the reject): the walk stops before that frame, and
  // the owner calls advance() again once it has room.
  template <class OnReject>
  std::optional<std::uint64_t> advance(OnReject&& on_reject);

  // Numbered and not yet passed by the cumulative confirm (settled or not).
  std::uint64_t pending() const noexcept { return next_number_ - 1 - confirmed_; }
  // The highest number confirmed so far (0: none).
  std::uint64_t confirmed() const noexcept { return confirmed_; }
  // Blocks the owner's list holds (for tests).
  std::size_t blocks() const noexcept { return blocks_.size(); }

 private:
  friend struct confirm_ledger_release;
  // Numbers rejected at read whose reject is not given out yet: `count` numbers from `first`.
  struct reject_run {
    std::uint64_t first;
    std::uint32_t count;
    reject_reason why;
  };
  // Numbers rejected at read just before the entry of seq `seq` (so entries need no number).
  struct number_gap {
    std::uint64_t seq;
    std::uint64_t count;
  };

  confirm_ledger(std::weak_ptr<confirm_owner> owner, std::size_t capacity,
                 runtime::byte_budget* budget);
  ~confirm_ledger() = default;
  // add() at a block's end (once per block: kept out of add()'s path).
  [[gnu::noinline]] void add_block();
  // The number of the oldest entry not yet passed (first_seq_ < next_seq_).
  std::uint64_t first_number() noexcept;
  // Calls on_reject, reading a void one as "done".
  template <class OnReject>
  static bool give(OnReject& on_reject, std::uint64_t number, reject_reason why);
  // The owner let go of its handle: the list lets go of every block, the ledger goes, and its
  // anchor stays as long as a block does.
  void close() noexcept;
  // A vector's storage as counted in the budget.
  template <class T>
  void recharge(const std::vector<T>& v, std::size_t& charged) noexcept;
  void charge(std::int64_t bytes) noexcept { anchor_->charge(bytes); }

  confirm_anchor* const anchor_;
  const std::size_t capacity_;
  // Owner's strand only. Entries are counted in sequence (seq), apart from numbers: the blocks
  // hold seqs first_seq_ (the oldest not yet passed) to next_seq_ (the next to give);
  // blocks_.front() starts at base_seq_; the newest has back_used_ entries numbered.
  std::vector<confirm_block*> blocks_;
  std::uint64_t first_seq_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t base_seq_ = 0;
  std::uint32_t back_used_ = 0;
  std::uint32_t next_block_ = 1;  // entries of the next block made
  std::uint64_t next_number_ = 1;
  std::uint64_t confirmed_ = 0;
  std::vector<reject_run> runs_;  // from runs_head_ on: not given out yet
  std::size_t runs_head_ = 0;
  std::size_t runs_charged_ = 0;  // runs_.capacity() as counted in the budget
  std::vector<number_gap> gaps_;  // from gaps_head_ on: at or after first_seq_
  std::size_t gaps_head_ = 0;
  std::size_t gaps_charged_ = 0;
  std::uint64_t skipped_ = 0;  // numbers rejected at read before the entry of first_seq_
};

template <class OnReject>
bool confirm_ledger::give(OnReject& on_reject, std::uint64_t number, reject_reason why) {
  if constexpr (std::is_same_v<std::invoke_result_t<OnReject&, std::uint64_t, reject_reason>,
                               bool>) {
    return on_reject(number, why);
  } else {
    on_reject(number, why);
    return true;
  }
}

template <class OnReject>
std::optional<std::uint64_t> confirm_ledger::advance(OnReject&& on_reject) {
  // Taken before the walk: a settler that finds the flag already set (and so does not wake the
  // owner again) settled before this exchange, and the walk below sees its settlement.
  anchor_->flush_due.exchange(false, std::memory_order_acq_rel);
  bool room = true;
  // Rejected at read: out at once, whatever is owed before them (the contract).
  while (room && runs_head_ < runs_.size()) {
    reject_run& run = runs_[runs_head_];
    while (run.count > 0) {
      if (!give(on_reject, run.first, run.why)) {
        room = false;
        break;
      }
      ++run.first;
      --run.count;
    }
    if (run.count == 0) ++runs_head_;
  }
  if (runs_head_ == runs_.size()) {
    runs_.clear();
    runs_head_ = 0;
  }
  while (room && first_seq_ < next_seq_) {
    confirm_block* const front = blocks_.front();
    confirm_entry& e = front->entry(first_seq_ - base_seq_);
    if (e.owing_.load(std::memory_order_acquire) != 0) break;
    const std::uint8_t r = e.reason_.load(std::memory_order_relaxed);
    if (r & confirm_entry::unsettled_bit) break;  // never confirmed: resent elsewhere
    if (r && !give(on_reject, first_number(), static_cast<reject_reason>(r))) break;
    ++first_seq_;
    if (first_seq_ - base_seq_ == front->capacity) {
      blocks_.erase(blocks_.begin());
      base_seq_ += front->capacity;
      front->release();
    }
  }
  // Up to the first frame still owed, or whose reject is not out yet.
  std::uint64_t upto = next_number_ - 1;
  if (first_seq_ < next_seq_) upto = std::min(upto, first_number() - 1);
  if (runs_head_ < runs_.size()) upto = std::min(upto, runs_[runs_head_].first - 1);
  if (upto <= confirmed_) return std::nullopt;
  confirmed_ = upto;
  return upto;
}

}  // namespace gatewayd::protocol
