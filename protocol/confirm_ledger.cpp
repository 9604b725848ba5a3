#include "protocol/confirm_ledger.hpp"

namespace gatewayd::protocol {

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
  // The holds not yet given back keep the block, and through it the ledger, alive until here.
  block_->settled(count_);
  block_ = nullptr;
  count_ = 0;
}

void confirm_block::settled(std::uint32_t n) noexcept {
  ledger->entry_settled();
  release(n);
}

void confirm_block::release(std::uint32_t n) noexcept {
  if (holders.fetch_sub(n, std::memory_order_acq_rel) != n) return;
  confirm_ledger* const l = ledger;
  delete this;
  l->charge(-static_cast<std::int64_t>(confirm_ledger::block_bytes));
  l->release();
}

std::size_t confirm_ledger::ledger_bytes() noexcept {
  return sizeof(confirm_ledger);
}

confirm_ledger_ptr confirm_ledger::make(std::weak_ptr<confirm_owner> owner, std::size_t capacity,
                                        confirm_ledger_budget* budget) {
  return confirm_ledger_ptr(new confirm_ledger(std::move(owner), capacity, budget));
}

confirm_ledger::confirm_ledger(std::weak_ptr<confirm_owner> owner, std::size_t capacity,
                               confirm_ledger_budget* budget)
    : owner_(std::move(owner)), capacity_(capacity), budget_(budget) {
  charge(static_cast<std::int64_t>(ledger_bytes()));
}

confirm_ledger::~confirm_ledger() {
  charge(-static_cast<std::int64_t>(ledger_bytes()));
}

void confirm_ledger::charge(std::int64_t bytes) noexcept {
  if (!budget_) return;
  if (bytes >= 0) {
    budget_->take(static_cast<std::uint64_t>(bytes));
  } else {
    budget_->give_back(static_cast<std::uint64_t>(-bytes));
  }
}

confirm_entry& confirm_ledger::entry(std::uint64_t seq) noexcept {
  const std::uint64_t offset = seq - base_seq_;
  return blocks_[offset / block_entries]->entries[offset % block_entries];
}

void confirm_ledger::add_block() {
  auto* b = new confirm_block;
  b->ledger = this;
  holders_.fetch_add(1, std::memory_order_relaxed);
  charge(static_cast<std::int64_t>(block_bytes));
  blocks_.push_back(b);
}

confirm_entry* confirm_ledger::add(std::uint32_t consumers) {
  if (pending() >= capacity_) return nullptr;
  const std::uint64_t offset = next_seq_ - base_seq_;
  if (offset / block_entries == blocks_.size()) add_block();
  // The next seq is always in the newest block.
  confirm_block* const block = blocks_.back();
  confirm_entry& e = block->entries[offset % block_entries];
  ++next_seq_;
  e.block_ = block;
  e.number_ = next_number_++;
  e.reason_.store(0, std::memory_order_relaxed);
  // The entry holds its block (a hold taken with the block) until its last consumer settled it.
  e.owing_.store(consumers, std::memory_order_relaxed);
  return &e;
}

bool confirm_ledger::reject_at_read(reject_reason why) {
  if (pending() >= capacity_) return false;
  const std::uint64_t number = next_number_++;
  if (runs_head_ < runs_.size()) {
    reject_run& last = runs_.back();
    if (last.why == why && last.first + last.count == number && last.count < UINT32_MAX) {
      ++last.count;
      return true;
    }
  }
  runs_.push_back({number, 1, why});
  if (runs_.capacity() != runs_charged_) {
    charge(
        (static_cast<std::int64_t>(runs_.capacity()) - static_cast<std::int64_t>(runs_charged_)) *
        static_cast<std::int64_t>(sizeof(reject_run)));
    runs_charged_ = runs_.capacity();
  }
  return true;
}

void confirm_ledger::entry_settled() noexcept {
  if (!flush_due_.exchange(true, std::memory_order_acq_rel)) {
    if (const auto owner = owner_.lock()) owner->confirms_settled();
  }
}

// The connection is gone: nobody reads its confirms any more. What nobody owes goes now; a
// block with an entry still owed stays, held by that entry, until its consumer settles it.
void confirm_ledger::close() noexcept {
  std::vector<confirm_block*> blocks;
  blocks.swap(blocks_);
  std::vector<reject_run>().swap(runs_);
  charge(-static_cast<std::int64_t>(runs_charged_ * sizeof(reject_run)));
  runs_charged_ = 0;
  // The blocks' entries never numbered (only the newest block can have any) give back their
  // holds first; the list's hold keeps that block until the loop.
  const std::uint64_t never_numbered = blocks.size() * block_entries - (next_seq_ - base_seq_);
  if (never_numbered) blocks.back()->release(static_cast<std::uint32_t>(never_numbered));
  for (confirm_block* b : blocks)
    b->release();
  release();
}

void confirm_ledger::release() noexcept {
  if (holders_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

}  // namespace gatewayd::protocol
