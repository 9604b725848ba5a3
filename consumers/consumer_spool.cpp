// A consumer's spool: where its frames go, and which of those in memory are the spool's copies.
#include "consumers/consumer_spool.hpp"

#include <algorithm>
#include <cassert>

namespace gatewayd::consumers {

void consumer_spool::attach(std::shared_ptr<spool> s) {
  spool_ = std::move(s);
  // What a start finds on disk is older than anything routed since: it goes first.
  unread_ = spool_ ? spool_->stats().frames.load(std::memory_order_relaxed) : 0;
  mode_ = unread_ ? mode::spooling : mode::memory;
}

// The table in consumer_spool.hpp: two modes, each may go to the other.
void consumer_spool::enter(mode to) noexcept {
  assert(may_enter(mode_, to));
  mode_ = to;
}

void consumer_spool::append(std::span<const protocol::frame_slice> frames) {
  if (frames.empty()) return;
  spool_->append(frames);
  unread_ += frames.size();
}

bool consumer_spool::is_copy(const protocol::frame_slice& f) const noexcept {
  return std::any_of(copies_.begin(), copies_.end(),
                     [&](const copies_in& c) { return c.chunk == f.chunk; });
}

void consumer_spool::spill(std::vector<protocol::frame_slice>& held) {
  // Every read out is stale from here on; the copies in memory are let go and read again.
  ++generation_;
  reading_ = false;
  const bool holds = unread_ != 0 || !copies_.empty();
  std::uint64_t copies = 0;
  protocol::release_batch released;
  std::size_t kept = 0;
  for (const protocol::frame_slice& f : held) {
    if (is_copy(f)) {
      released.add(f.chunk);  // a copy carries no CONFIRM entry: its record is on disk
      ++copies;
    } else {
      held[kept++] = f;
    }
  }
  released.flush();
  held.resize(kept);
  // Copies not in `held` are out: in a write the socket may still take, or written and awaiting
  // their acknowledgement. They are the oldest the consumer has (it spills what follows them),
  // so they stay copies, consumed from the spool when delivered, and reading goes on after
  // their records. Let go with the rest, a write that then succeeded would deliver them once,
  // and the spool, which never heard of it, a second time.
  const std::uint64_t left = copies_left();
  const std::uint64_t out = keep_oldest_copies(left > copies ? left - copies : 0);
  spool_->rewind(out);
  unread_ += copies;
  if (!held.empty()) {
    // Memory's frames come before every copy (frames go to memory again only once no copy is
    // left): with copies out, `held` holds none.
    assert(out == 0);
    // Older than anything the spool holds: in front of it (after the rewind nothing is read).
    if (holds) {
      spool_->prepend(held);
    } else {
      spool_->append(held);
    }
    unread_ += held.size();
  }
  held.clear();
  if (mode_ == mode::memory) enter(mode::spooling);
}

std::uint64_t consumer_spool::copies_left() const noexcept {
  std::uint64_t n = 0;
  for (const copies_in& c : copies_)
    n += c.left;
  return n;
}

std::uint64_t consumer_spool::keep_oldest_copies(std::uint64_t n) noexcept {
  std::uint64_t kept = 0;
  std::size_t i = 0;
  for (; i < copies_.size() && kept < n; ++i) {
    copies_[i].left = std::min(copies_[i].left, n - kept);
    kept += copies_[i].left;
  }
  copies_.erase(copies_.begin() + static_cast<std::ptrdiff_t>(i), copies_.end());
  return kept;
}

bool consumer_spool::read_if_due(std::size_t max_bytes) {
  if (!spool_ || reading_ || unread_ == 0) return false;
  reading_ = true;
  unread_at_read_ = unread_;
  spool_->read(max_bytes, generation_);
  return true;
}

bool consumer_spool::read_back(std::span<const protocol::frame_slice> frames,
                               std::uint64_t generation) {
  if (generation != generation_) return false;
  reading_ = false;
  if (frames.empty()) {
    // Nothing unread when it was asked: frames counted as handed over were refused (full).
    unread_ -= std::min(unread_, unread_at_read_);
    return true;
  }
  // One read is one chunk (spool_thread), its records in order.
  copies_.push_back({frames.front().chunk, frames.size()});
  unread_ -= std::min<std::uint64_t>(unread_, frames.size());
  return true;
}

void consumer_spool::delivered(std::span<const protocol::frame_slice> frames) {
  if (copies_.empty()) return;
  std::uint64_t consumed = 0;
  for (const protocol::frame_slice& f : frames) {
    if (copies_.empty()) break;
    if (f.chunk != copies_.front().chunk) continue;  // a frame older than the copies
    ++consumed;
    if (--copies_.front().left == 0) copies_.pop_front();
  }
  if (consumed) spool_->consume(consumed);
}

}  // namespace gatewayd::consumers
