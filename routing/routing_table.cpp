#include "routing/routing_table.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <bitset>
#include <cstring>
#include <map>
#include <stdexcept>

#include "protocol/address.hpp"
#include "routing/pattern.hpp"
#include "runtime/hash.hpp"

namespace gatewayd::routing {
namespace {

// A valid address has at most this many tokens (one character and a dot each).
constexpr std::size_t max_tokens = (protocol::max_address_length + 1) / 2;

std::uint64_t edge_hash(std::uint32_t parent, std::uint64_t token_hash) noexcept {
  return runtime::mix(token_hash ^ (std::uint64_t{parent} * 0x9e3779b97f4a7c15ULL));
}

}  // namespace

struct routing_table::walk {
  lookup_scratch& scratch;
  std::size_t token_count;
  // Tokens are hashed when a node with literal children asks for them, once each: below a
  // `>` route nothing is hashed (t.> answers t.x.1234 from the first token alone).
  std::bitset<max_tokens> hashed;
  // What the walk depended on: the nodes it visited go this deep, and it read the values of
  // this many leading tokens. Past both, the address made no difference (lookup_result's
  // decided_by).
  std::size_t deepest = 0;
  std::size_t examined = 0;
  // Until a second non-empty consumer list matches, the answer is the first one, straight
  // from the table: the common single-route case needs no merge at all.
  std::span<const consumer_index> first;
  bool merging = false;

  void add(std::span<const consumer_index> list, pattern_index pattern) {
    if (list.empty()) return;
    scratch.patterns_.push_back(pattern);
    if (first.empty()) {
      first = list;
      return;
    }
    if (!merging) {
      merging = true;
      if (++scratch.generation_ == 0) {
        // Wrapped after 2^32 merges: old stamps could now look current.
        std::fill(scratch.seen_.begin(), scratch.seen_.end(), 0);
        scratch.generation_ = 1;
      }
      scratch.merged_.clear();
      take(first);
    }
    take(list);
  }

  std::uint64_t token_hash(std::size_t depth) noexcept {
    if (!hashed.test(depth)) {
      scratch.token_hashes_[depth] = runtime::hash_bytes(scratch.tokens_[depth]);
      hashed.set(depth);
    }
    return scratch.token_hashes_[depth];
  }

  void take(std::span<const consumer_index> list) {
    for (const consumer_index c : list) {
      if (scratch.seen_[c] == scratch.generation_) continue;
      scratch.seen_[c] = scratch.generation_;
      scratch.merged_.push_back(c);
    }
  }
};

// Grown with ordered maps first; the flat lookup structures are laid out once the shape is known.
struct routing_table::draft {
  struct node {
    std::uint32_t star = no_node;
    std::vector<consumer_index> exact;
    std::vector<consumer_index> tail;
    pattern_index exact_pattern = no_pattern;
    pattern_index tail_pattern = no_pattern;
  };
  std::vector<node> nodes = std::vector<node>(1);
  std::map<std::pair<std::uint32_t, std::string>, std::uint32_t> literal_edges;

  // The child of `at` for `token` (`*` or a literal), made if it is not there yet.
  std::uint32_t child(std::uint32_t at, std::string_view token) {
    if (token == one_token_wildcard) {
      if (nodes[at].star == no_node) {
        nodes[at].star = static_cast<std::uint32_t>(nodes.size());
        nodes.emplace_back();
      }
      return nodes[at].star;
    }
    auto [it, inserted] = literal_edges.try_emplace({at, std::string{token}}, 0);
    if (inserted) {
      it->second = static_cast<std::uint32_t>(nodes.size());
      nodes.emplace_back();
    }
    return it->second;
  }
};

std::shared_ptr<const routing_table> routing_table::build(const routing_rules& rules) {
  static std::atomic<std::uint64_t> next_id{1};
  std::shared_ptr<routing_table> table{new routing_table};
  table->rules_ = rules;
  table->id_ = next_id.fetch_add(1, std::memory_order_relaxed);
  table->index_consumers();
  draft d;
  for (const auto& route : rules.routes)
    table->add_route(d, route);
  table->lay_out(d);
  return table;
}

void routing_table::index_consumers() {
  for (consumer_index i = 0; i < rules_.consumers.size(); ++i) {
    if (!consumer_by_name_.emplace(rules_.consumers[i], i).second)
      throw std::invalid_argument("duplicate consumer \"" + rules_.consumers[i] + '"');
  }
  if (!rules_.dead_letter) return;
  dead_letter_ = find_consumer(*rules_.dead_letter);
  if (!dead_letter_)
    throw std::invalid_argument("unknown dead-letter consumer \"" + *rules_.dead_letter + '"');
  dead_letter_list_[0] = *dead_letter_;
}

void routing_table::add_route(draft& d, const route_spec& route) {
  if (auto why = pattern_error(route.match))
    throw std::invalid_argument("invalid pattern \"" + route.match + "\": " + *why);
  std::vector<consumer_index> targets;
  for (const auto& name : route.to) {
    const auto index = find_consumer(name);
    if (!index) throw std::invalid_argument("route names unknown consumer \"" + name + '"');
    targets.push_back(*index);
  }
  std::uint32_t at = 0;
  bool tail = false;
  for (const auto token : split_tokens(route.match)) {
    if (token == tail_wildcard) {
      tail = true;
      break;
    }
    at = d.child(at, token);
  }
  auto& list = tail ? d.nodes[at].tail : d.nodes[at].exact;
  list.insert(list.end(), targets.begin(), targets.end());
  // A pattern is where its routes end in the trie: the same `match` twice is one pattern.
  auto& pattern = tail ? d.nodes[at].tail_pattern : d.nodes[at].exact_pattern;
  if (pattern == no_pattern) pattern = static_cast<pattern_index>(pattern_count_++);
  route_patterns_.push_back(pattern);
}

void routing_table::lay_out(draft& d) {
  nodes_.resize(d.nodes.size());
  auto flatten = [this](std::vector<consumer_index>& list, std::uint32_t& begin,
                        std::uint32_t& count) {
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
    begin = static_cast<std::uint32_t>(consumer_lists_.size());
    count = static_cast<std::uint32_t>(list.size());
    consumer_lists_.insert(consumer_lists_.end(), list.begin(), list.end());
  };
  for (std::size_t i = 0; i < d.nodes.size(); ++i) {
    nodes_[i].star = d.nodes[i].star;
    nodes_[i].exact_pattern = d.nodes[i].exact_pattern;
    nodes_[i].tail_pattern = d.nodes[i].tail_pattern;
    flatten(d.nodes[i].exact, nodes_[i].exact_begin, nodes_[i].exact_count);
    flatten(d.nodes[i].tail, nodes_[i].tail_begin, nodes_[i].tail_count);
  }
  // At most half full keeps probe sequences short for both hits and misses.
  edges_.resize(std::bit_ceil(std::max<std::size_t>(16, d.literal_edges.size() * 2)));
  edge_mask_ = edges_.size() - 1;
  for (const auto& [key, child] : d.literal_edges)
    insert_edge(key.first, key.second, child);
}

void routing_table::insert_edge(std::uint32_t parent, std::string_view token, std::uint32_t child) {
  const auto h = edge_hash(parent, runtime::hash_bytes(token));
  std::size_t slot = h & edge_mask_;
  while (edges_[slot].child != 0)
    slot = (slot + 1) & edge_mask_;
  edges_[slot] = edge{static_cast<std::uint32_t>(h >> 32), parent, child,
                      static_cast<std::uint32_t>(token_pool_.size())};
  token_pool_ += static_cast<char>(token.size());  // tokens are at most 255 bytes long
  token_pool_ += token;
  ++nodes_[parent].literal_children;
}

std::uint32_t routing_table::find_child(std::uint32_t parent, std::string_view token,
                                        std::uint64_t token_hash) const noexcept {
  const auto h = edge_hash(parent, token_hash);
  const auto tag = static_cast<std::uint32_t>(h >> 32);
  for (std::size_t slot = h & edge_mask_;; slot = (slot + 1) & edge_mask_) {
    const edge& e = edges_[slot];
    if (e.child == 0) return no_node;
    if (e.tag != tag || e.parent != parent) continue;
    const char* stored = token_pool_.data() + e.token;
    if (static_cast<unsigned char>(stored[0]) == token.size() &&
        std::memcmp(stored + 1, token.data(), token.size()) == 0) {
      return e.child;
    }
  }
}

void routing_table::collect(std::uint32_t node_id, std::size_t depth, walk& w) const {
  const node& n = nodes_[node_id];
  const auto lists = consumer_lists_.data();
  w.deepest = std::max(w.deepest, depth);
  if (depth == w.token_count) {
    w.add({lists + n.exact_begin, n.exact_count}, n.exact_pattern);
    return;
  }
  w.add({lists + n.tail_begin, n.tail_count}, n.tail_pattern);
  if (n.literal_children != 0) {
    w.examined = std::max(w.examined, depth + 1);
    const auto child = find_child(node_id, w.scratch.tokens_[depth], w.token_hash(depth));
    if (child != no_node) collect(child, depth + 1, w);
  }
  if (n.star != no_node) collect(n.star, depth + 1, w);
}

lookup_result routing_table::lookup(std::string_view address, lookup_scratch& scratch) const {
  auto& tokens = scratch.tokens_;
  if (tokens.capacity() < max_tokens) {
    tokens.reserve(max_tokens);
    scratch.token_hashes_.resize(max_tokens);
    scratch.patterns_.reserve(16);
    scratch.merged_.reserve(std::min<std::size_t>(rules_.consumers.size(), 64));
  }
  if (scratch.seen_.size() < rules_.consumers.size()) {
    scratch.seen_.resize(rules_.consumers.size(), 0);
  }
  tokens.clear();
  scratch.patterns_.clear();
  std::size_t start = 0;
  while (true) {
    const auto dot = address.find('.', start);
    const auto token = address.substr(start, dot == std::string_view::npos ? dot : dot - start);
    tokens.push_back(token);
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }

  walk w{scratch, tokens.size(), {}, 0, 0, {}, false};
  collect(0, 0, w);
  // The walk never reached the end of the address, nor read a token past `read`: any address
  // with the same first `read` tokens and at least one more is walked the same way.
  const std::size_t read = std::max(w.deepest, w.examined);
  const std::size_t decided_by =
      read < tokens.size() ? static_cast<std::size_t>(tokens[read].data() - address.data())
                           : lookup_result::whole;
  if (w.merging) {
    std::sort(scratch.merged_.begin(), scratch.merged_.end());
    return {scratch.merged_, true, scratch.patterns_, decided_by};
  }
  if (!w.first.empty()) return {w.first, true, scratch.patterns_, decided_by};
  if (dead_letter_) return {dead_letter_list_, false, {}, decided_by};
  return {{}, false, {}, decided_by};
}

std::optional<consumer_index> routing_table::find_consumer(std::string_view name) const {
  const auto it = consumer_by_name_.find(std::string{name});
  if (it == consumer_by_name_.end()) return std::nullopt;
  return it->second;
}

}  // namespace gatewayd::routing
