// The routing table: an immutable token trie, built once from a validated routing_rules.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "routing/routing_rules.hpp"

namespace gatewayd::routing {

// A consumer's position in routing_rules::consumers (and so in routing_table::consumers()).
using consumer_index = std::uint32_t;
// One distinct pattern of the table: routes with the same `match` share it
// (routing_table::route_pattern). What route hit counts are kept by.
using pattern_index = std::uint32_t;

struct lookup_result {
  // Ascending, each consumer once. Points into the table, the scratch or the route_cache
  // that produced it: valid until the next lookup through that scratch or cache, and while
  // the table lives.
  std::span<const consumer_index> consumers;
  // False when no route matched; `consumers` is then the dead-letter consumer, if any.
  bool matched = false;
  // The patterns that matched, each once, in no particular order; empty when none did. Valid
  // as long as `consumers`.
  std::span<const pattern_index> patterns;
  // How much of the address decided this answer: every address that starts with its first
  // `decided_by` bytes (empty, or tokens ending in a '.') gets the same answer, patterns and
  // all. `whole` when the lookup reached the end of the address. A `>` route makes the tokens
  // after it irrelevant: t.> answers t.x.1 and t.y.2 alike (decided_by 2, "t."), so a router
  // can answer a run of such addresses without a lookup each (route_cache).
  std::size_t decided_by = whole;
  static constexpr std::size_t whole = static_cast<std::size_t>(-1);
};

class routing_table;

// Working storage for lookups, owned by the caller (a session or a thread) and reused, so a
// lookup allocates nothing once the scratch has grown to its working size. One scratch must
// not be used by two threads at once; any number of scratches may use one table.
class lookup_scratch {
 public:
  lookup_scratch() = default;  // allocates on first use: idle sessions pay nothing

 private:
  friend class routing_table;
  std::vector<std::string_view> tokens_;
  std::vector<std::uint64_t> token_hashes_;
  std::vector<consumer_index> merged_;
  std::vector<pattern_index> patterns_;
  // seen_[c] == generation_ marks consumer c as already in merged_ for this lookup, so
  // dedupe costs no clearing between lookups.
  std::vector<std::uint32_t> seen_;
  std::uint32_t generation_ = 0;
};

// Lookups walk the address's tokens down a trie whose edges are literal tokens (one open-
// addressing hash table for the whole trie, keyed by parent node and token), a `*` edge per
// node, and a `>` consumer set per node. The walk visits each trie node at most once, so a
// lookup costs roughly the number of tokens times the number of wildcard branches alive,
// independent of the number of routes. Immutable after build(): threads share it freely.
class routing_table {
 public:
  // Builds the table. The rules must have passed the loader's validation; a pattern or a
  // consumer reference the loader would refuse throws std::invalid_argument.
  static std::shared_ptr<const routing_table> build(const routing_rules& rules);

  // The consumers of every route matching `address`, which must be a valid GWP/1 address
  // (the frame codec has checked it). No allocation once `scratch` is warm.
  lookup_result lookup(std::string_view address, lookup_scratch& scratch) const;

  // Consumer names by index.
  const std::vector<std::string>& consumers() const noexcept { return rules_.consumers; }
  const routing_rules& rules() const noexcept { return rules_; }
  std::size_t route_count() const noexcept { return rules_.routes.size(); }
  std::optional<consumer_index> dead_letter() const noexcept { return dead_letter_; }
  std::optional<consumer_index> find_consumer(std::string_view name) const;
  // Distinct patterns, and the one route `r` (its position in rules().routes) matches by.
  std::size_t pattern_count() const noexcept { return pattern_count_; }
  pattern_index route_pattern(std::size_t r) const noexcept { return route_patterns_[r]; }

  // Unique for every table built in this process, never reused (unlike an address, which a
  // new table may get after an old one is freed): caches key on it.
  std::uint64_t id() const noexcept { return id_; }

  // Trie size, for tests and metrics.
  std::size_t node_count() const noexcept { return nodes_.size(); }

 private:
  static constexpr std::uint32_t no_node = 0xffffffffu;
  static constexpr pattern_index no_pattern = 0xffffffffu;

  struct node {
    std::uint32_t star = no_node;        // child for `*`
    std::uint32_t literal_children = 0;  // skip the hash probe when a node has none
    std::uint32_t exact_begin = 0;       // routes ending here: consumer_lists_ range
    std::uint32_t exact_count = 0;
    std::uint32_t tail_begin = 0;  // routes ending here with `>`: one or more tokens more
    std::uint32_t tail_count = 0;
    pattern_index exact_pattern = no_pattern;  // the pattern of the routes ending here
    pattern_index tail_pattern = no_pattern;
  };

  struct edge {
    std::uint32_t tag = 0;  // upper hash bits: most mismatches end here
    std::uint32_t parent = 0;
    std::uint32_t child = 0;  // 0 marks a free slot (the root is nobody's child)
    std::uint32_t token = 0;  // offset in token_pool_: a length byte, then the bytes
  };

  struct walk;   // the state of one lookup
  struct draft;  // the trie while build() grows it (routing_table.cpp)

  routing_table() = default;
  // build()'s steps: the consumers by name and the dead letter, then the routes into a draft
  // trie, then the draft laid out flat for lookups.
  void index_consumers();
  void add_route(draft& d, const route_spec& route);
  void lay_out(draft& d);
  void insert_edge(std::uint32_t parent, std::string_view token, std::uint32_t child);
  std::uint32_t find_child(std::uint32_t parent, std::string_view token,
                           std::uint64_t token_hash) const noexcept;
  void collect(std::uint32_t node_id, std::size_t depth, walk& w) const;

  routing_rules rules_;
  std::unordered_map<std::string, consumer_index> consumer_by_name_;
  std::optional<consumer_index> dead_letter_;
  consumer_index dead_letter_list_[1] = {0};
  std::uint64_t id_ = 0;

  std::vector<node> nodes_;  // nodes_[0] is the root
  std::vector<edge> edges_;  // power-of-two size, at most half full
  std::uint64_t edge_mask_ = 0;
  std::string token_pool_;
  std::vector<consumer_index> consumer_lists_;
  std::vector<pattern_index> route_patterns_;  // by route
  std::size_t pattern_count_ = 0;
};

}  // namespace gatewayd::routing
