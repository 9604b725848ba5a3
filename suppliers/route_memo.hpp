// The routes for the last few addresses a thread routed: a supplier that repeats one address,
// or cycles through a few, is answered by a memcmp instead of a hash and a cache probe.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "routing/route_cache.hpp"
#include "routing/routing_table.hpp"
#include "suppliers/address_memo.hpp"

namespace gatewayd::suppliers {

// Each entry keeps its own copy of the answer (the route cache may evict the entry a span would
// point into) and the run of frames it answered since their route hits were last credited.
// Answers too big to copy are not remembered (the caller looks them up each time).
struct route_answer {
  std::uint8_t consumer_count = 0;
  std::uint8_t pattern_count = 0;
  bool matched = false;
  std::uint64_t run = 0;  // frames answered and not yet credited to the patterns
  std::array<routing::consumer_index, routing::route_cache::max_consumers> consumers{};
  std::array<routing::pattern_index, routing::route_cache::max_patterns> patterns{};

  static bool fits(const routing::lookup_result& r) noexcept {
    return r.consumers.size() <= routing::route_cache::max_consumers &&
           r.patterns.size() <= routing::route_cache::max_patterns;
  }

  // A copy of `r` (fits() must hold), with no run yet.
  static route_answer of(const routing::lookup_result& r) noexcept {
    route_answer a;
    a.matched = r.matched;
    a.consumer_count = static_cast<std::uint8_t>(r.consumers.size());
    std::copy(r.consumers.begin(), r.consumers.end(), a.consumers.begin());
    a.pattern_count = static_cast<std::uint8_t>(r.patterns.size());
    std::copy(r.patterns.begin(), r.patterns.end(), a.patterns.begin());
    return a;
  }

  routing::lookup_result result() const noexcept {
    return {{consumers.data(), consumer_count}, matched, {patterns.data(), pattern_count}};
  }
};

// Valid for one table only: credit the runs, then forget, when the table changes.
using route_memo = address_memo<route_answer>;

}  // namespace gatewayd::suppliers
