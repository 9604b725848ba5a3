#include "suppliers/frame_router.hpp"

namespace gatewayd::suppliers {

frame_router& frame_router::begin_pass(const route_snapshot_holder& routes) {
  thread_local frame_router router;
  // Announce the table first, then check it is still the newest: a reload that published a
  // newer one either is seen here or sees this pass in route_readers::all_past.
  for (;;) {
    if (router.holder_ != &routes || router.version_ != routes.version()) router.refresh(routes);
    router.reading_.enter(router.version_);
    if (routes.version() == router.version_) return router;
  }
}

void frame_router::refresh(const route_snapshot_holder& routes) {
  publish_hits();  // counted by the table they were routed by
  holder_ = &routes;
  snapshot_ = routes.load();
  version_ = snapshot_ ? snapshot_->version : 0;
  memo_.forget();  // answers of the old table must not be reused (publish_hits credited them)
  permissions_ = snapshot_ ? snapshot_->permissions.get() : nullptr;
  rule_ = routing::publish_permissions::default_rule;
  allows_all_ = !permissions_ || permissions_->allows_all(rule_);
  permits_.forget();
  const std::size_t n = snapshot_ ? snapshot_->consumers.size() : 0;
  if (batches_.size() < n) batches_.resize(n);
  const std::size_t patterns =
      snapshot_ && snapshot_->table ? snapshot_->table->pattern_count() : 0;
  if (pattern_hits_.size() < patterns) pattern_hits_.resize(patterns);
}

void frame_router::credit(std::span<const routing::pattern_index> patterns,
                          std::uint64_t frames) noexcept {
  if (frames == 0) return;
  for (const routing::pattern_index p : patterns) {
    if (pattern_hits_[p] == 0) touched_patterns_.push_back(p);
    pattern_hits_[p] += frames;
  }
}

void frame_router::publish_hits() noexcept {
  for (route_memo::entry& e : memo_.entries()) {
    credit(e.answer.result().patterns, e.answer.run);
    e.answer.run = 0;
  }
  for (const routing::pattern_index p : touched_patterns_) {
    snapshot_->pattern_hits[p].fetch_add(pattern_hits_[p], std::memory_order_relaxed);
    pattern_hits_[p] = 0;
  }
  touched_patterns_.clear();
}

routing::lookup_result frame_router::answer(std::string_view address) {
  if (route_memo::entry* e = memo_.find(address)) {
    ++e->answer.run;
    return e->answer.result();
  }
  const auto result = cache_.lookup(*snapshot_->table, address, scratch_);
  if (!route_memo::fits(address) || !route_answer::fits(result)) {
    credit(result.patterns, 1);
    return result;  // valid until the next lookup, which is after this frame is routed
  }
  const route_answer& old = memo_.victim().answer;
  credit(old.result().patterns, old.run);
  route_memo::entry& e = memo_.remember(address);
  e.answer = route_answer::of(result);
  e.answer.run = 1;
  return e.answer.result();
}

bool frame_router::route(std::string_view address, const protocol::frame_slice& slice) {
  if (!snapshot_) return false;
  const routing::lookup_result result = answer(address);
  fan_out(result.consumers, slice);
  return result.matched;
}

protocol::confirm_entry* frame_router::route_confirmed(std::string_view address,
                                                       protocol::frame_slice slice,
                                                       protocol::confirm_ledger& ledger,
                                                       bool& matched) {
  matched = false;
  if (!snapshot_) return ledger.add(0, protocol::reject_reason::unroutable);
  const routing::lookup_result result = answer(address);
  matched = result.matched;
  protocol::confirm_entry* const entry =
      ledger.add(static_cast<std::uint32_t>(result.consumers.size()));
  if (!entry || result.consumers.empty()) return entry;
  slice.confirm = entry;
  fan_out(result.consumers, slice);
  return entry;
}

void frame_router::fan_out(std::span<const routing::consumer_index> consumers,
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
}

void frame_router::supplier(std::string_view identity) noexcept {
  if (!permissions_) return;
  const auto rule = permissions_->rule_for(identity);
  if (rule == rule_) return;
  rule_ = rule;
  allows_all_ = permissions_->allows_all(rule);
  permits_.forget();  // the memo answered for another rule
}

bool frame_router::permitted(std::string_view address) noexcept {
  if (allows_all_) return true;
  if (const permission_memo::entry* known = permits_.find(address)) return known->answer;
  const bool answer = permissions_->permitted(rule_, address);
  if (permission_memo::fits(address)) permits_.remember(address).answer = answer;
  return answer;
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
  for (const routing::consumer_index i : touched_) {
    auto& batch = batches_[i];
    const auto put = snapshot_->consumers[i]->put(batch, listener, write_here);
    r.pause = r.pause || put.pause_supplier;
    r.paused_by_consumer = r.paused_by_consumer || put.paused_by_consumer;
    wrote = wrote || put.wrote;
    batch.clear();
  }
  // Other threads write everything this pass routed (posted now, or already writing).
  r.handed_off = !write_here && !wrote;
  touched_.clear();
  reading_.leave();
  return r;
}

}  // namespace gatewayd::suppliers
