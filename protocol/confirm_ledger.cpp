#include "protocol/confirm_ledger.hpp"

namespace gatewayd::protocol {

void confirm_ledger_release::operator()(confirm_ledger* l) const noexcept {
  l->release();
}

void confirm_entry::rejected(reject_reason why) noexcept {
  std::uint8_t none = 0;
  // The first reason stands: a frame dropped for one consumer and removed for another is
  // rejected once, as dropped.
  reason_.compare_exchange_strong(none, static_cast<std::uint8_t>(why), std::memory_order_relaxed);
  settle();
}

void confirm_entry::settle() noexcept {
  // Read before the decrement: once it reaches zero the owner may move past this entry and
  // free its block.
  confirm_ledger* const ledger = ledger_;
  if (owing_.fetch_sub(1, std::memory_order_acq_rel) == 1) ledger->entry_settled();
}

confirm_ledger_ptr confirm_ledger::make(std::weak_ptr<confirm_owner> owner, std::size_t capacity) {
  return confirm_ledger_ptr(new confirm_ledger(std::move(owner), capacity));
}

confirm_entry& confirm_ledger::at(std::uint64_t number) noexcept {
  const std::uint64_t offset = number - base_;
  return blocks_[offset / block_entries]->entries[offset % block_entries];
}

confirm_entry* confirm_ledger::add(std::uint32_t consumers, reject_reason why) {
  if (next_ - first_ >= capacity_) return nullptr;
  if ((next_ - base_) / block_entries == blocks_.size())
    blocks_.push_back(std::make_unique<block>());
  confirm_entry& e = at(next_++);
  e.ledger_ = this;
  if (consumers == 0) {
    // Settled as it is numbered: the owner's next advance() rejects it in its turn.
    e.reason_.store(static_cast<std::uint8_t>(why), std::memory_order_relaxed);
    e.owing_.store(0, std::memory_order_relaxed);
    return &e;
  }
  e.reason_.store(0, std::memory_order_relaxed);
  e.owing_.store(consumers, std::memory_order_relaxed);
  holders_.fetch_add(1, std::memory_order_relaxed);
  return &e;
}

void confirm_ledger::entry_settled() noexcept {
  if (!flush_due_.exchange(true, std::memory_order_acq_rel)) {
    if (const auto owner = owner_.lock()) owner->confirms_settled();
  }
  release();
}

void confirm_ledger::release() noexcept {
  if (holders_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

}  // namespace gatewayd::protocol
