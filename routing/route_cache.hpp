// The routing answers a thread gave lately, and whether the supplier's publish rule allowed
// them: a repeated address costs a hash and a memcmp instead of a trie walk and pattern matches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "routing/publish_permissions.hpp"
#include "routing/routing_table.hpp"
#include "runtime/hash.hpp"

namespace gatewayd::routing {

// Most supplier traffic repeats a handful of addresses, so a small cache in front of the
// trie answers most lookups without walking it. Four-way set-associative: with one or two
// ways, a few hot addresses landing in one set evict each other on every frame (16 hot
// addresses in a 64-entry direct-mapped cache do that to about a quarter of them). The tags
// of a set sit together, so a lookup reads one small block of tags and compares the address
// bytes of at most the one entry whose tag matches.
//
// Before any hashing a lookup tries the entry that answered last, then the one that answered
// after it last time, then the runs; when a run answered the last lookup, that run first. A run
// of one address costs one compare, a supplier cycling over a few addresses two, a supplier
// spreading over a prefix one.
//
// A run: a table walk that did not need the whole address (lookup_result::decided_by, a `>`
// route) leaves its answer keyed by the prefix that decided it, so that every following
// address with that prefix (t.x.1, t.x.2, ... under t.>) is answered by one short compare,
// however many distinct addresses the supplier cycles through: a million addresses cost what
// one does, with nothing stored per address. The last few such prefixes are kept (a supplier
// mixing orders.> and audit.> keeps both), the one that answered last tried first. The publish
// answer depends on the whole address, so a supplier with a publish rule to check is not
// answered by a run.
//
// The one cache on the routing path (the frame router's, one per thread: not thread-safe);
// keyed by the table's id(), so publishing a new table empties it on the next lookup. Beside
// each entry sits the publish answer for the last rule that asked about its address: a thread
// routing for several suppliers of different rules re-checks on a change of rule, never answers
// for the wrong one. Addresses longer than max_address_length, and
// results naming more than max_consumers consumers or max_patterns patterns, are looked up in
// the table every time: making room for them would make every session's cache bigger for a
// rare case.
// Who is asking, for the publish answer: a rule of `permissions` (null: everything is
// permitted, nothing is checked).
struct publish_check {
  const publish_permissions* permissions = nullptr;
  publish_permissions::rule_index rule = publish_permissions::default_rule;
};

struct cached_answer {
  lookup_result route;
  bool permitted = true;
};

class route_cache {
 public:
  // 1,024 entries (128 KiB a thread, allocated on first lookup) hold the addresses a busy
  // supplier mixes (issue 45 measured 256 distinct ones missing a 64-entry cache on every
  // frame); a larger space is answered by the run, or walks the trie: bounded either way.
  static constexpr std::size_t entry_count = 1024;  // a power of two, at most 65,536
  static constexpr std::size_t ways = 4;
  static constexpr std::size_t max_consumers = 8;
  static constexpr std::size_t max_patterns = 4;
  static constexpr std::size_t max_address_length = 76;
  static constexpr std::size_t run_count = 4;

  route_cache() = default;  // the entries are allocated on first lookup
  route_cache(const route_cache&) = delete;
  route_cache& operator=(const route_cache&) = delete;
  route_cache(route_cache&&) noexcept = default;
  route_cache& operator=(route_cache&&) noexcept = default;

  // Same answer as table.lookup(address, scratch). The result's span points into this
  // cache (or, on a bypass, wherever the table's answer lives) and stays valid until the
  // next lookup through this cache.
  lookup_result lookup(const routing_table& table, std::string_view address,
                       lookup_scratch& scratch) {
    return lookup(table, address, scratch, publish_check{}).route;
  }
  // The route as above and, with one probe, whether `who` may publish to `address` (the same
  // answer as who.permissions->permitted(who.rule, address)).
  cached_answer lookup(const routing_table& table, std::string_view address,
                       lookup_scratch& scratch, const publish_check& who) {
    // Suppliers send runs of one address, or cycle over a few (frame i to consumer i mod n),
    // or spread over many under one prefix: the entry that answered last, then the one that
    // answered after it last time, then the runs, are tried here in the caller before any
    // hashing; the run first when a run answered last, so that a spread costs one compare too.
    if (storage_ && table_id_ == table.id() && !address.empty()) {
      if (answered_from_ == source::run && !who.permissions && in_run(last_run_, address)) {
        return run_answer(last_run_);
      }
      if (const std::size_t at = last_hit_; holds(at, address)) {
        ++hits_;
        return answer(at, who, address);
      }
      if (const std::size_t at = storage_->next_hit[last_hit_]; holds(at, address)) {
        ++hits_;
        return answer(at, who, address);
      }
      if (runs_ != 0 && !who.permissions) {
        if (const std::size_t r = find_run(address); r != no_run) return run_answer(r);
      }
    }
    return probe(table, address, scratch, who);
  }

  void clear() noexcept;
  // The publish rules changed (a new snapshot): the routes stay, the publish answers go.
  void forget_permissions() noexcept;

  std::uint64_t hits() const noexcept { return hits_; }
  std::uint64_t misses() const noexcept { return misses_; }  // including bypasses

 private:
  struct entry {
    std::uint8_t address_length = 0;  // 0 marks an empty entry (addresses are never empty)
    std::uint8_t consumer_count = 0;
    std::uint8_t pattern_count = 0;
    bool matched = false;
    consumer_index consumers[max_consumers] = {};
    pattern_index patterns[max_patterns] = {};  // for the route hit counts
    char address[max_address_length] = {};
  };
  static_assert(sizeof(entry) == 128, "an entry should stay two cache lines");
  static_assert(entry_count <= 65536, "next_hit numbers entries in 16 bits");

  struct storage {
    std::uint32_t tags[entry_count] = {};  // upper hash bits, set by set
    // By entry: 0 = no publish answer, else (rule + 1) * 2 + permitted (1 or 0).
    std::uint32_t permits[entry_count] = {};
    // By entry: the entry that answered after it, last time (a cycle of addresses learns its
    // order).
    std::uint16_t next_hit[entry_count] = {};
    entry entries[entry_count];
    // The runs' answers (runs_ of them); each one's address is the prefix that decided it.
    entry runs[run_count];
  };
  static constexpr std::size_t no_run = static_cast<std::size_t>(-1);
  // Where the last answer came from: an entry (however it was found) or a run.
  enum class source : std::uint8_t { entry, run };
  bool in_run(std::size_t r, std::string_view address) const noexcept {
    const std::size_t n = storage_->runs[r].address_length;  // 0: every address
    return n < address.size() && runtime::same_bytes(storage_->runs[r].address, address.data(), n);
  }
  // The run whose prefix `address` starts with, or no_run.
  std::size_t find_run(std::string_view address) noexcept {
    if (in_run(last_run_, address)) return last_run_;
    for (std::size_t r = 0; r < runs_; ++r) {
      if (r != last_run_ && in_run(r, address)) return last_run_ = r;
    }
    return no_run;
  }
  // Keeps `result`, decided by the first result.decided_by bytes of `address`, as a run.
  void start_run(std::string_view address, const lookup_result& result) noexcept;
  static bool ask(const publish_check& who, std::string_view address) noexcept {
    return !who.permissions || who.permissions->permitted(who.rule, address);
  }
  bool holds(std::size_t at, std::string_view address) const noexcept {
    const entry& e = storage_->entries[at];
    return e.address_length == address.size() &&
           runtime::same_bytes(e.address, address.data(), address.size());
  }
  // Entry `at` answers: its route and publish answer; it becomes the last hit, and the one
  // after the previous last hit.
  cached_answer answer(std::size_t at, const publish_check& who,
                       std::string_view address) noexcept {
    answered_from_ = source::entry;
    storage_->next_hit[last_hit_] = static_cast<std::uint16_t>(at);
    last_hit_ = at;
    const entry& e = storage_->entries[at];
    return {{{e.consumers, e.consumer_count}, e.matched, {e.patterns, e.pattern_count}},
            permitted(at, who, address)};
  }
  // Run `r` answers (only a supplier with no publish rule to check asks the runs).
  cached_answer run_answer(std::size_t r) noexcept {
    ++hits_;
    answered_from_ = source::run;
    const entry& e = storage_->runs[r];
    return {{{e.consumers, e.consumer_count}, e.matched, {e.patterns, e.pattern_count}}, true};
  }
  // The publish answer kept at entry `at` for `who`, asked and kept if it is not there.
  bool permitted(std::size_t at, const publish_check& who, std::string_view address) noexcept {
    return !who.permissions || kept_permission(at, who, address);
  }
  bool kept_permission(std::size_t at, const publish_check& who, std::string_view address) noexcept;
  // lookup() past the last hit: hashes, probes the set, and on a miss asks the table.
  cached_answer probe(const routing_table& table, std::string_view address, lookup_scratch& scratch,
                      const publish_check& who);

  std::unique_ptr<storage> storage_;
  std::uint64_t table_id_ = 0;
  std::uint64_t hits_ = 0;
  std::uint64_t misses_ = 0;
  std::uint32_t next_victim_ = 0;         // round-robin over the ways: no pathological cycle
  std::size_t last_hit_ = 0;              // the entry that answered last
  source answered_from_ = source::entry;  // a run here is tried first
  std::size_t runs_ = 0;                  // runs in use, 0..run_count
  std::size_t last_run_ = 0;              // the run that answered or started last: tried first
  std::size_t next_run_ = 0;              // the run a new prefix replaces once all are in use
};

}  // namespace gatewayd::routing
