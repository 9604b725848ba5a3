// Routing lookups per second for 10, 1,000 and 10,000 routes: the trie alone and through
// a session's route_cache, over addresses of 3-5 tokens that both hit and miss.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <initializer_list>
#include <map>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "routing/route_cache.hpp"
#include "routing/routing_table.hpp"

namespace {

using namespace gatewayd::routing;

// Concatenation by appending: `a + b` on temporaries trips GCC 12's -Wrestrict false
// positive at -O3.
std::string cat(std::initializer_list<std::string_view> parts) {
  std::string s;
  for (const auto p : parts)
    s += p;
  return s;
}

// Token vocabularies sized so that 10,000 routes stay mostly distinct, like a real
// deployment with many services, regions and event types.
struct vocabulary {
  std::vector<std::string> domains, stray_domains, regions, entities, events;
  vocabulary() {
    const char* domain_names[] = {"orders",   "payments", "audit",  "inventory", "users",
                                  "shipping", "billing",  "search", "pricing",   "catalog"};
    for (int i = 0; i < 60; ++i)
      domains.push_back(cat({domain_names[i % 10], std::to_string(i / 10)}));
    for (int i = 0; i < 10; ++i)
      stray_domains.push_back(cat({"telemetry", std::to_string(i)}));
    const char* region_names[] = {"eu", "us", "apac", "latam", "mea"};
    for (int i = 0; i < 20; ++i)
      regions.push_back(cat({region_names[i % 5], "-", std::to_string(i / 5)}));
    for (int i = 0; i < 100; ++i)
      entities.push_back(cat({"entity_", std::to_string(i)}));
    for (const char* e : {"created", "updated", "deleted", "shipped", "failed", "retried",
                          "approved", "rejected", "opened", "closed"}) {
      events.push_back(e);
    }
  }
};

struct workload {
  std::shared_ptr<const routing_table> table;
  std::vector<std::string> addresses;  // half derived from routes (hits), half random
};

const std::string& pick(std::mt19937& rng, const std::vector<std::string>& v) {
  return v[std::uniform_int_distribution<std::size_t>{0, v.size() - 1}(rng)];
}

// A route: 3 or 4 literal tokens, some with `*` in place of one of them, some ending in `>`.
std::string random_pattern(std::mt19937& rng, const vocabulary& v) {
  const int kind = std::uniform_int_distribution<int>{0, 99}(rng);
  std::vector<std::string_view> tokens = {pick(rng, v.domains), pick(rng, v.regions),
                                          pick(rng, v.entities), pick(rng, v.events)};
  if (kind < 50) {  // literal, 3 or 4 tokens
    if (kind < 15) tokens.pop_back();
  } else if (kind < 80) {  // one `*`
    tokens[std::uniform_int_distribution<std::size_t>{1, 3}(rng)] = "*";
  } else {  // a `>` tail after 1-3 tokens
    tokens.resize(std::uniform_int_distribution<std::size_t>{1, 3}(rng));
    tokens.push_back(">");
  }
  std::string s;
  for (const auto& t : tokens) {
    if (!s.empty()) s += '.';
    s += t;
  }
  return s;
}

// An address the pattern matches: wildcards replaced by tokens, `>` by 1 or 2 tokens.
std::string matching_address(std::mt19937& rng, const vocabulary& v, const std::string& pattern) {
  std::string s;
  std::size_t start = 0;
  while (start <= pattern.size()) {
    auto dot = pattern.find('.', start);
    if (dot == std::string::npos) dot = pattern.size();
    const auto token = pattern.substr(start, dot - start);
    if (!s.empty()) s += '.';
    if (token == "*") {
      s += pick(rng, v.entities);
    } else if (token == ">") {
      s += pick(rng, v.entities);
      if (rng() % 2) {
        s += '.';
        s += pick(rng, v.events);
      }
    } else {
      s += token;
    }
    start = dot + 1;
  }
  return s;
}

// Half of these start with a domain no route names (certain misses); the rest may or may
// not match, depending on how dense the table is.
std::string random_address(std::mt19937& rng, const vocabulary& v) {
  const auto& domains = rng() % 2 ? v.stray_domains : v.domains;
  std::string s = cat({pick(rng, domains), ".", pick(rng, v.regions), ".", pick(rng, v.entities)});
  const auto extra = rng() % 3;  // 3 to 5 tokens
  if (extra >= 1) s += cat({".", pick(rng, v.events)});
  if (extra >= 2) s += cat({".", pick(rng, v.entities)});
  return s;
}

workload make_workload(std::size_t route_count) {
  static const vocabulary v;
  std::mt19937 rng{static_cast<std::mt19937::result_type>(route_count)};
  routing_rules config;
  for (int i = 0; i < 32; ++i)
    config.consumers.push_back(cat({"consumer", std::to_string(i)}));
  const std::vector<std::string>& names = config.consumers;
  std::set<std::string> seen;
  while (config.routes.size() < route_count) {
    auto pattern = random_pattern(rng, v);
    if (!seen.insert(pattern).second) continue;
    route_spec route{std::move(pattern), {}};
    const auto fan_out = 1 + rng() % 3;
    for (std::size_t k = 0; k < fan_out; ++k)
      route.to.push_back(pick(rng, names));
    std::sort(route.to.begin(), route.to.end());
    route.to.erase(std::unique(route.to.begin(), route.to.end()), route.to.end());
    config.routes.push_back(std::move(route));
  }
  config.dead_letter = "consumer0";

  workload w;
  w.table = routing_table::build(config);
  for (int i = 0; i < 1024; ++i) {
    w.addresses.push_back(
        i % 2 ? random_address(rng, v)
              : matching_address(rng, v, config.routes[rng() % config.routes.size()].match));
  }
  return w;
}

const workload& workload_for(std::size_t routes) {
  static std::map<std::size_t, workload> cache;
  auto it = cache.find(routes);
  if (it == cache.end()) it = cache.emplace(routes, make_workload(routes)).first;
  return it->second;
}

void report(benchmark::State& state, const workload& w, std::size_t matched, std::size_t total) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  state.counters["routes"] = static_cast<double>(w.table->route_count());
  state.counters["matched%"] =
      total ? 100.0 * static_cast<double>(matched) / static_cast<double>(total) : 0;
}

// The trie alone, cycling through 1,024 distinct addresses.
void trie_lookup(benchmark::State& state) {
  const auto& w = workload_for(static_cast<std::size_t>(state.range(0)));
  lookup_scratch scratch;
  std::size_t i = 0, matched = 0, total = 0;
  for (auto _ : state) {
    const auto r = w.table->lookup(w.addresses[i++ & 1023], scratch);
    benchmark::DoNotOptimize(r.consumers.data());
    matched += r.matched;
    ++total;
  }
  report(state, w, matched, total);
}

// Through a route_cache with `distinct` addresses in rotation: 16 is the common "few hot
// addresses" session (all hits once warm); 1,024 overflows the 64 entries (mostly misses).
void cached_lookup(benchmark::State& state) {
  const auto& w = workload_for(static_cast<std::size_t>(state.range(0)));
  const auto distinct = static_cast<std::size_t>(state.range(1));
  lookup_scratch scratch;
  route_cache cache;
  std::size_t i = 0, matched = 0, total = 0;
  for (auto _ : state) {
    const auto r = cache.lookup(*w.table, w.addresses[i++ % distinct], scratch);
    benchmark::DoNotOptimize(r.consumers.data());
    matched += r.matched;
    ++total;
  }
  report(state, w, matched, total);
  state.counters["hit%"] = 100.0 * static_cast<double>(cache.hits()) /
                           static_cast<double>(cache.hits() + cache.misses());
}

}  // namespace

BENCHMARK(trie_lookup)->Arg(10)->Arg(1000)->Arg(10000);
BENCHMARK(cached_lookup)->ArgsProduct({{10, 1000, 10000}, {16, 1024}});

BENCHMARK_MAIN();
