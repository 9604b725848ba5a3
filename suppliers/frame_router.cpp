#include "suppliers/frame_router.hpp"

#include <algorithm>

namespace gatewayd::suppliers {

namespace {
std::atomic<std::size_t> scratch_total{0};
}  // namespace

frame_router::~frame_router() {
  std::size_t slots = 0;
  for (const std::size_t s : counted_slots_)
    slots += s;
  scratch_total.fetch_sub(slots * sizeof(protocol::frame_slice), std::memory_order_relaxed);
}

std::size_t frame_router::scratch_bytes() noexcept {
  return scratch_total.load(std::memory_order_relaxed);
}

void frame_router::begin_pass(const route_snapshot_holder& routes) {
  // Announce the table first, then check it is still the newest: a reload that published a
  // newer one either is seen here or sees this pass in route_readers::all_past.
  for (;;) {
    if (holder_ != &routes || version_ != routes.version()) refresh(routes);
    reading_.enter(version_);
    if (routes.version() == version_) return;
  }
}

void frame_router::refresh(const route_snapshot_holder& routes) {
  publish_hits();  // counted by the table they were routed by
  holder_ = &routes;
  snapshot_ = routes.load();
  version_ = snapshot_ ? snapshot_->version : 0;
  permissions_ = snapshot_ ? snapshot_->permissions.get() : nullptr;
  who_ = {};
  if (permissions_ && !permissions_->allows_all(who_.rule)) who_.permissions = permissions_;
  cache_.forget_permissions();  // the rules may have changed with the table kept
  const std::size_t n =
      snapshot_ ? std::max(snapshot_->consumers.size(), snapshot_->targets.size()) : 0;
  if (batches_.size() < n) {
    batches_.resize(n);
    counted_slots_.resize(n);
  }
  const std::size_t patterns =
      snapshot_ && snapshot_->table ? snapshot_->table->pattern_count() : 0;
  if (pattern_hits_.size() < patterns) pattern_hits_.resize(patterns);
}

inline void frame_router::credit(std::span<const routing::pattern_index> patterns) noexcept {
  for (const routing::pattern_index p : patterns) {
    if (pattern_hits_[p]++ == 0) touched_patterns_.push_back(p);
  }
}

void frame_router::publish_hits() noexcept {
  for (const routing::pattern_index p : touched_patterns_) {
    snapshot_->pattern_hits[p].fetch_add(pattern_hits_[p], std::memory_order_relaxed);
    pattern_hits_[p] = 0;
  }
  touched_patterns_.clear();
}

frame_router::outcome frame_router::route(std::string_view address,
                                          const protocol::frame_slice& slice) {
  if (!snapshot_) return outcome::unroutable;
  const auto answer = cache_.lookup(*snapshot_->table, address, scratch_, who_);
  if (!answer.permitted) return outcome::not_permitted;
  const routing::lookup_result& result = answer.route;
  credit(result.patterns);
  fan_out(result.consumers, slice);
  return result.matched ? outcome::routed : outcome::unroutable;
}

frame_router::outcome frame_router::route_confirmed(std::string_view address,
                                                    protocol::frame_slice slice,
                                                    protocol::confirm_ledger& ledger,
                                                    bool& numbered) {
  if (!snapshot_) {
    numbered = ledger.reject_at_read(protocol::reject_reason::unroutable);
    return outcome::unroutable;
  }
  const auto answer = cache_.lookup(*snapshot_->table, address, scratch_, who_);
  if (!answer.permitted) {
    numbered = ledger.reject_at_read(protocol::reject_reason::not_permitted);
    return outcome::not_permitted;
  }
  const routing::lookup_result& result = answer.route;
  credit(result.patterns);
  if (result.consumers.empty()) {
    // Unroutable, no dead letter: settled as read, rejected at once, no entry.
    numbered = ledger.reject_at_read(protocol::reject_reason::unroutable);
    return outcome::unroutable;
  }
  protocol::confirm_entry* entry = ledger.add(static_cast<std::uint32_t>(result.consumers.size()));
  numbered = entry != nullptr;
  if (entry) {
    slice.confirm = entry;
    fan_out(result.consumers, slice);
  }
  return result.matched ? outcome::routed : outcome::unroutable;
}

inline void frame_router::fan_out(std::span<const routing::consumer_index> consumers,
                                  const protocol::frame_slice& slice) {
  if (slice.chunk != refs_chunk_) {
    hold();
    refs_chunk_ = slice.chunk;
  }
  for (const routing::consumer_index i : consumers) {
    auto& batch = batches_[i];
    if (batch.empty()) touched_.push_back(i);
    batch.push_back(slice);
  }
  pending_refs_ += static_cast<std::uint32_t>(consumers.size());
  slices_ += consumers.size();
}

void frame_router::supplier(std::string_view identity) noexcept {
  if (!permissions_) return;
  const auto rule = permissions_->rule_for(identity);
  if (rule == who_.rule) return;
  who_.rule = rule;
  // The cache keeps each address's answer with the rule it is for: nothing to forget here.
  who_.permissions = permissions_->allows_all(rule) ? nullptr : permissions_;
}

void frame_router::hold() noexcept {
  if (pending_refs_) refs_chunk_->add_refs(pending_refs_);
  pending_refs_ = 0;
}

frame_router::flush_result frame_router::flush(
    const std::shared_ptr<consumers::flow_control_listener>& listener, bool write_here) {
  // References first: a consumer may send and release a frame before put() even returns.
  hold();
  refs_chunk_ = nullptr;
  publish_hits();
  flush_result r;
  bool wrote = false;
  std::size_t grown = 0;  // slots the pass's batches grew by (a batch never shrinks)
  for (const routing::consumer_index i : touched_) {
    auto& batch = batches_[i];
    grown += batch.capacity() - counted_slots_[i];
    counted_slots_[i] = batch.capacity();
    const auto put = snapshot_->put(i, batch, listener, group_scratch_, write_here);
    r.pause = r.pause || put.pause_supplier;
    r.paused_by_consumer = r.paused_by_consumer || put.paused_by_consumer;
    wrote = wrote || put.wrote;
    batch.clear();
  }
  // Other threads write everything this pass routed (posted now, or already writing).
  r.handed_off = !write_here && !wrote;
  touched_.clear();
  slices_ = 0;
  // Counted once a pass, not where a batch grows: fan_out stays the tight loop it was.
  if (grown)
    scratch_total.fetch_add(grown * sizeof(protocol::frame_slice), std::memory_order_relaxed);
  reading_.leave();
  return r;
}

}  // namespace gatewayd::suppliers
