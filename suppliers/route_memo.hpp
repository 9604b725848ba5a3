// The answers for the last few addresses a thread routed: a supplier that repeats one address,
// or cycles through a few, is answered by a memcmp instead of a hash and a cache probe.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "routing/route_cache.hpp"
#include "routing/routing_table.hpp"

namespace gatewayd::suppliers {

// Each entry keeps its own copy of the answer (the route cache may evict the entry a span would
// point into) and the run of frames it answered since their route hits were last credited.
// Frames interleaving a handful of addresses (each frame to the next consumer in turn) are the
// common mixed shape; the entry after the last hit is tried second, so a round over the entries
// costs two compares per frame. Answers too big to copy are not remembered (the caller looks
// them up each time).
class route_memo {
 public:
  static constexpr std::size_t ways = 4;
  static constexpr std::size_t max_address = 64;

  struct entry {
    std::uint8_t length = 0;  // 0 = empty (addresses are never empty)
    std::uint8_t consumer_count = 0;
    std::uint8_t pattern_count = 0;
    bool matched = false;
    std::uint64_t run = 0;  // frames answered and not yet credited to the patterns
    std::array<routing::consumer_index, routing::route_cache::max_consumers> consumers{};
    std::array<routing::pattern_index, routing::route_cache::max_patterns> patterns{};
    char address[max_address] = {};

    routing::lookup_result result() const noexcept {
      return {{consumers.data(), consumer_count}, matched, {patterns.data(), pattern_count}};
    }
  };

  entry* find(std::string_view address) noexcept {
    if (address.empty()) return nullptr;  // an empty entry must not answer it
    if (entry* e = match(last_, address)) return e;
    for (std::size_t i = 1; i < ways; ++i) {
      const std::size_t at = (last_ + i) % ways;
      if (entry* e = match(at, address)) {
        last_ = at;
        return e;
      }
    }
    return nullptr;
  }

  // The entry the next remembered answer replaces: credit its run before remember().
  entry& victim() noexcept { return entries_[next_]; }

  static bool fits(std::string_view address, const routing::lookup_result& r) noexcept {
    return !address.empty() && address.size() <= max_address &&
           r.consumers.size() <= routing::route_cache::max_consumers &&
           r.patterns.size() <= routing::route_cache::max_patterns;
  }

  // Stores `r` (fits() must hold) in victim(), which becomes the last hit.
  entry& remember(std::string_view address, const routing::lookup_result& r) noexcept {
    entry& e = entries_[next_];
    e.length = static_cast<std::uint8_t>(address.size());
    std::memcpy(e.address, address.data(), address.size());
    e.matched = r.matched;
    e.consumer_count = static_cast<std::uint8_t>(r.consumers.size());
    std::copy(r.consumers.begin(), r.consumers.end(), e.consumers.begin());
    e.pattern_count = static_cast<std::uint8_t>(r.patterns.size());
    std::copy(r.patterns.begin(), r.patterns.end(), e.patterns.begin());
    e.run = 0;
    last_ = next_;
    next_ = (next_ + 1) % ways;
    return e;
  }

  std::span<entry> entries() noexcept { return entries_; }

  // Answers of another table must not be reused (credit the runs first).
  void forget() noexcept {
    for (entry& e : entries_)
      e = entry{};
    last_ = next_ = 0;
  }

 private:
  entry* match(std::size_t at, std::string_view address) noexcept {
    entry& e = entries_[at];
    return e.length == address.size() && std::memcmp(e.address, address.data(), e.length) == 0
               ? &e
               : nullptr;
  }

  std::array<entry, ways> entries_{};
  std::size_t last_ = 0;  // the entry that answered last
  std::size_t next_ = 0;  // the next to replace: round robin, no pathological cycle
};

}  // namespace gatewayd::suppliers
