#include "protocol/confirm_ledger.hpp"

namespace gatewayd::protocol {

static_assert(sizeof(confirm_entry) == 16, "an owed frame of a closed connection costs this");
static_assert(sizeof(confirm_anchor) + confirm_block::bytes_for(1) <= 64,
              "a closed connection with one frame owed keeps at most 64 bytes");

void confirm_ledger_release::operator()(confirm_ledger* l) const noexcept {
  l->close();
}

void confirm_entry::mark_rejected(reject_reason why) noexcept {
  std::uint8_t none = 0;
  // The first reason stands: a frame dropped for one consumer and removed for another is
  // rejected once, as dropped.
  reason_.compare_exchange_strong(none, static_cast<std::uint8_t>(why), std::memory_order_relaxed);
}

void confirm_entry::mark_unsettled() noexcept {
  // Whatever another consumer said: one that did not settle it keeps it from every confirm.
  reason_.fetch_or(unsettled_bit, std::memory_order_relaxed);
}

void confirm_entry::settle() noexcept {
  if (confirm_block* const block = settle_one()) block->settled(1);
}

void confirm_settlements::flush() noexcept {
  if (!block_) return;
  // The holds not yet given back keep the block, and through it the anchor, alive until here.
  block_->settled(count_);
  block_ = nullptr;
  count_ = 0;
}

void confirm_anchor::lock_owner() noexcept {
  while (owner_locked_.test_and_set(std::memory_order_acquire))
    owner_locked_.wait(true, std::memory_order_relaxed);
}

void confirm_anchor::unlock_owner() noexcept {
  owner_locked_.clear(std::memory_order_release);
  owner_locked_.notify_one();
}

void confirm_anchor::set_owner(std::weak_ptr<confirm_owner> to) noexcept {
  lock_owner();
  owner_.swap(to);
  unlock_owner();
  // The old one goes here, outside the lock.
}

void confirm_anchor::entry_settled() noexcept {
  if (!flush_due.exchange(true, std::memory_order_acq_rel)) {
    lock_owner();
    std::shared_ptr<confirm_owner> o = owner_.lock();
    unlock_owner();
    if (o) o->confirms_settled();
  }
}

void confirm_anchor::charge(std::int64_t bytes) noexcept {
  if (!budget) return;
  if (bytes >= 0) {
    budget->take(static_cast<std::uint64_t>(bytes));
  } else {
    budget->give_back(static_cast<std::uint64_t>(-bytes));
  }
}

void confirm_anchor::release() noexcept {
  if (holders.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  charge(-static_cast<std::int64_t>(sizeof(confirm_anchor)));
  delete this;
}

confirm_block* confirm_block::make(confirm_anchor* anchor, std::uint32_t capacity) {
  void* const at = ::operator new(bytes_for(capacity));
  auto* const b = new (at) confirm_block;
  b->anchor = anchor;
  b->capacity = capacity;
  b->holders.store(1 + capacity, std::memory_order_relaxed);
  for (std::uint32_t i = 0; i < capacity; ++i)
    new (&b->entry(i)) confirm_entry;
  return b;
}

void confirm_block::settled(std::uint32_t n) noexcept {
  anchor->entry_settled();
  release(n);
}

void confirm_block::release(std::uint32_t n) noexcept {
  if (holders.fetch_sub(n, std::memory_order_acq_rel) != n) return;
  confirm_anchor* const a = anchor;
  const std::size_t bytes = bytes_for(capacity);
  // Entries and header hold nothing to destroy (atomics and pointers).
  ::operator delete(this);
  a->charge(-static_cast<std::int64_t>(bytes));
  a->release();
}

std::size_t confirm_ledger::ledger_bytes() noexcept {
  return sizeof(confirm_ledger) + sizeof(confirm_anchor);
}

confirm_ledger_ptr confirm_ledger::make(std::weak_ptr<confirm_owner> owner, std::size_t capacity,
                                        runtime::byte_budget* budget) {
  return confirm_ledger_ptr(new confirm_ledger(std::move(owner), capacity, budget));
}

confirm_ledger::confirm_ledger(std::weak_ptr<confirm_owner> owner, std::size_t capacity,
                               runtime::byte_budget* budget)
    : anchor_(new confirm_anchor), capacity_(capacity) {
  anchor_->budget = budget;
  anchor_->set_owner(std::move(owner));
  charge(static_cast<std::int64_t>(ledger_bytes()));
}

void confirm_ledger::add_block() {
  confirm_block* const b = confirm_block::make(anchor_, next_block_);
  next_block_ = std::min<std::uint32_t>(next_block_ * 2, block_entries);
  anchor_->holders.fetch_add(1, std::memory_order_relaxed);
  charge(static_cast<std::int64_t>(confirm_block::bytes_for(b->capacity)));
  blocks_.push_back(b);
  back_used_ = 0;
}

template <class T>
void confirm_ledger::recharge(const std::vector<T>& v, std::size_t& charged) noexcept {
  if (v.capacity() == charged) return;
  charge((static_cast<std::int64_t>(v.capacity()) - static_cast<std::int64_t>(charged)) *
         static_cast<std::int64_t>(sizeof(T)));
  charged = v.capacity();
}

bool confirm_ledger::reject_at_read(reject_reason why) {
  if (pending() >= capacity_) return false;
  const std::uint64_t number = next_number_++;
  // The entry numbered next is one number further on.
  if (gaps_head_ < gaps_.size() && gaps_.back().seq == next_seq_) {
    ++gaps_.back().count;
  } else {
    gaps_.push_back({next_seq_, 1});
    recharge(gaps_, gaps_charged_);
  }
  if (runs_head_ < runs_.size()) {
    reject_run& last = runs_.back();
    if (last.why == why && last.first + last.count == number && last.count < UINT32_MAX) {
      ++last.count;
      return true;
    }
  }
  runs_.push_back({number, 1, why});
  recharge(runs_, runs_charged_);
  return true;
}

std::uint64_t confirm_ledger::first_number() noexcept {
  while (gaps_head_ < gaps_.size() && gaps_[gaps_head_].seq <= first_seq_)
    skipped_ += gaps_[gaps_head_++].count;
  if (gaps_head_ == gaps_.size()) {
    gaps_.clear();
    gaps_head_ = 0;
  }
  return first_seq_ + 1 + skipped_;
}

// The connection is gone: nobody reads its confirms any more. What nobody owes goes now, and
// the ledger with it; a block with an entry still owed stays, held by that entry, until its
// consumer settles it, and the anchor with the last such block.
void confirm_ledger::close() noexcept {
  anchor_->set_owner({});
  // The newest block's entries never numbered give back their holds first; the list's hold
  // keeps that block until the loop.
  if (!blocks_.empty() && back_used_ < blocks_.back()->capacity)
    blocks_.back()->release(blocks_.back()->capacity - back_used_);
  for (confirm_block* b : blocks_)
    b->release();
  charge(-static_cast<std::int64_t>(runs_charged_ * sizeof(reject_run) +
                                    gaps_charged_ * sizeof(number_gap) + sizeof(confirm_ledger)));
  confirm_anchor* const anchor = anchor_;
  delete this;
  anchor->release();
}

}  // namespace gatewayd::protocol
