#include "routing/route_cache.hpp"

#include <algorithm>
#include <cstring>
#include <iterator>

#include "runtime/hash.hpp"

namespace gatewayd::routing {

void route_cache::clear() noexcept {
  // In place: an emptied entry (address_length 0) matches no address, whatever else it holds.
  if (storage_) {
    std::fill(std::begin(storage_->tags), std::end(storage_->tags), 0u);
    std::fill(std::begin(storage_->permits), std::end(storage_->permits), 0u);
    std::fill(std::begin(storage_->next_hit), std::end(storage_->next_hit), std::uint16_t{0});
    for (entry& e : storage_->entries)
      e.address_length = 0;
  }
  runs_ = 0;
  last_run_ = 0;
  next_run_ = 0;
  last_hit_ = 0;
  answered_from_ = source::entry;
}

void route_cache::start_run(std::string_view address, const lookup_result& result) noexcept {
  // A prefix already kept (a supplier with a publish rule skips the runs and walks here):
  // nothing new to keep.
  for (std::size_t r = 0; r < runs_; ++r) {
    if (storage_->runs[r].address_length == result.decided_by && in_run(r, address)) return;
  }
  std::size_t r = runs_ < run_count ? runs_++ : next_run_++ % run_count;
  last_run_ = r;
  entry& e = storage_->runs[r];
  e.address_length = static_cast<std::uint8_t>(result.decided_by);
  e.consumer_count = static_cast<std::uint8_t>(result.consumers.size());
  e.pattern_count = static_cast<std::uint8_t>(result.patterns.size());
  e.matched = result.matched;
  std::copy(result.consumers.begin(), result.consumers.end(), e.consumers);
  std::copy(result.patterns.begin(), result.patterns.end(), e.patterns);
  std::memcpy(e.address, address.data(), result.decided_by);
}

void route_cache::forget_permissions() noexcept {
  if (storage_) std::fill(std::begin(storage_->permits), std::end(storage_->permits), 0u);
}

bool route_cache::kept_permission(std::size_t at, const publish_check& who,
                                  std::string_view address) noexcept {
  const std::uint32_t tagged = (who.rule + 1) * 2;
  std::uint32_t& kept = storage_->permits[at];
  if ((kept & ~1u) == tagged) return kept & 1u;
  const bool answer = ask(who, address);
  kept = tagged | (answer ? 1u : 0u);
  return answer;
}

cached_answer route_cache::probe(const routing_table& table, std::string_view address,
                                 lookup_scratch& scratch, const publish_check& who) {
  if (address.size() > max_address_length || address.empty()) {
    ++misses_;
    return {table.lookup(address, scratch), ask(who, address)};
  }
  if (!storage_) {
    storage_ = std::make_unique<storage>();
    table_id_ = table.id();
  } else if (table_id_ != table.id()) {
    clear();
    table_id_ = table.id();
  }
  const auto h = runtime::hash_bytes(address);
  const auto tag = static_cast<std::uint32_t>(h >> 32);
  const std::size_t first = (h & (entry_count / ways - 1)) * ways;
  const std::uint32_t* tags = storage_->tags + first;
  entry* set = storage_->entries + first;
  std::size_t empty_way = ways;
  for (std::size_t way = 0; way < ways; ++way) {
    const entry& e = set[way];
    if (e.address_length == 0) empty_way = way;
    if (tags[way] == tag && e.address_length == address.size() &&
        runtime::same_bytes(e.address, address.data(), address.size())) {
      ++hits_;
      return answer(first + way, who, address);
    }
  }

  ++misses_;
  const auto result = table.lookup(address, scratch);
  if (result.consumers.size() > max_consumers || result.patterns.size() > max_patterns) {
    return {result, ask(who, address)};
  }
  // Decided by a prefix: a run answers the addresses that follow with it. This one takes an
  // entry all the same, so that a few addresses of several prefixes in turn still hit.
  if (result.decided_by != lookup_result::whole) start_run(address, result);
  const std::size_t victim = empty_way != ways ? empty_way : next_victim_++ % ways;
  entry& e = set[victim];
  storage_->tags[first + victim] = tag;
  storage_->permits[first + victim] = 0;
  e.address_length = static_cast<std::uint8_t>(address.size());
  e.consumer_count = static_cast<std::uint8_t>(result.consumers.size());
  e.pattern_count = static_cast<std::uint8_t>(result.patterns.size());
  e.matched = result.matched;
  std::copy(result.consumers.begin(), result.consumers.end(), e.consumers);
  std::copy(result.patterns.begin(), result.patterns.end(), e.patterns);
  std::memcpy(e.address, address.data(), address.size());
  return answer(first + victim, who, address);
}

}  // namespace gatewayd::routing
