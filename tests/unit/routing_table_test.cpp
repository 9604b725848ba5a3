#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>
#include <random>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "routing/pattern.hpp"
#include "routing/route_cache.hpp"
#include "routing/routing_table.hpp"
#include "tests/support/routing_rules.hpp"

// Counts heap allocations so tests can assert that warm lookups make none. GCC cannot tell
// that this operator new is malloc underneath, hence the pragma on the matching deletes.
namespace {
std::atomic<std::size_t> allocation_count{0};
}
void* operator new(std::size_t n) {
  allocation_count.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc{};
}
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
#pragma GCC diagnostic pop

using namespace gatewayd::routing;
using gatewayd::test::indices;
using gatewayd::test::make_config;
using gatewayd::test::numbered;
using gatewayd::test::route_def;
using gatewayd::test::to_vector;

namespace {

// Looks `address` up and checks both the consumers and the matched flag.
void expect(const routing_table& table, std::string_view address, const indices& want,
            bool matched = true) {
  lookup_scratch scratch;
  const auto r = table.lookup(address, scratch);
  BOOST_TEST_INFO("address " << address);
  BOOST_TEST(to_vector(r) == want, boost::test_tools::per_element());
  BOOST_TEST_INFO("address " << address);
  BOOST_TEST(r.matched == matched);
}

// What the table must answer, from the reference matcher: the union of the consumers of
// every matching route, ascending.
indices oracle(const routing_table& table, std::string_view address) {
  std::set<consumer_index> want;
  for (const auto& route : table.rules().routes) {
    if (!pattern_matches(route.match, address)) continue;
    for (const auto& name : route.to)
      want.insert(*table.find_consumer(name));
  }
  return {want.begin(), want.end()};
}

// The patterns the table must report: those of every matching route, each once, ascending.
std::vector<pattern_index> pattern_oracle(const routing_table& table, std::string_view address) {
  std::set<pattern_index> want;
  for (std::size_t r = 0; r < table.rules().routes.size(); ++r) {
    if (pattern_matches(table.rules().routes[r].match, address))
      want.insert(table.route_pattern(r));
  }
  return {want.begin(), want.end()};
}

std::vector<pattern_index> sorted(std::span<const pattern_index> patterns) {
  std::vector<pattern_index> v(patterns.begin(), patterns.end());
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(semantics)

BOOST_AUTO_TEST_CASE(tail_wildcard_needs_at_least_one_token) {
  const auto table = routing_table::build(make_config({"c"}, {{"orders.>", {"c"}}}));
  expect(*table, "orders.eu", {0});
  expect(*table, "orders.eu.created", {0});
  expect(*table, "orders", {}, false);
  expect(*table, "ordersx.eu", {}, false);
  expect(*table, "audit.orders.eu", {}, false);
}

BOOST_AUTO_TEST_CASE(star_is_exactly_one_token) {
  const auto table = routing_table::build(make_config({"c"}, {{"orders.*.created", {"c"}}}));
  expect(*table, "orders.eu.created", {0});
  expect(*table, "orders.created", {}, false);
  expect(*table, "orders.eu.x.created", {}, false);
  expect(*table, "orders.eu.created.x", {}, false);
}

BOOST_AUTO_TEST_CASE(lone_wildcards) {
  const auto table =
      routing_table::build(make_config({"one", "all"}, {{"*", {"one"}}, {">", {"all"}}}));
  expect(*table, "a", {0, 1});
  expect(*table, "a.b", {1});
  expect(*table, "a.b.c.d.e", {1});
}

BOOST_AUTO_TEST_CASE(star_then_tail) {
  const auto table = routing_table::build(make_config({"c"}, {{"a.*.>", {"c"}}}));
  expect(*table, "a", {}, false);
  expect(*table, "a.b", {}, false);
  expect(*table, "a.b.c", {0});
  expect(*table, "a.b.c.d", {0});
  expect(*table, "b.b.c", {}, false);
}

BOOST_AUTO_TEST_CASE(literal_and_wildcard_overlap) {
  const auto table = routing_table::build(
      make_config({"exact", "star", "tail", "all", "mid"}, {{"orders.eu.created", {"exact"}},
                                                            {"orders.*.created", {"star"}},
                                                            {"orders.>", {"tail"}},
                                                            {">", {"all"}},
                                                            {"*.eu.*", {"mid"}}}));
  expect(*table, "orders.eu.created", {0, 1, 2, 3, 4});
  expect(*table, "orders.us.created", {1, 2, 3});
  expect(*table, "orders.eu.shipped", {2, 3, 4});
  expect(*table, "orders.eu", {2, 3});
  expect(*table, "orders", {3});
  expect(*table, "audit.eu.x", {3, 4});
}

BOOST_AUTO_TEST_CASE(fan_out_is_deduplicated_and_ascending) {
  // Route order and `to` order differ from consumer order on purpose.
  const auto table =
      routing_table::build(make_config({"c0", "c1", "c2", "c3"}, {{"x.>", {"c3", "c0"}},
                                                                  {"x.y", {"c2", "c3", "c1"}},
                                                                  {"x.*", {"c0", "c3"}},
                                                                  {"x.y", {"c0"}}}));
  expect(*table, "x.y", {0, 1, 2, 3});
  expect(*table, "x.z", {0, 3});
  expect(*table, "x.y.z", {0, 3});
}

BOOST_AUTO_TEST_CASE(single_route_answer_comes_from_the_table) {
  // The common case, one matching route, returns the route's own sorted list.
  const auto table = routing_table::build(make_config({"a", "b", "c"}, {{"k", {"c", "a", "b"}}}));
  expect(*table, "k", {0, 1, 2});
}

BOOST_AUTO_TEST_CASE(dead_letter_on_no_match) {
  const auto table = routing_table::build(
      make_config({"billing", "audit"}, {{"orders.*.created", {"billing"}}}, "audit"));
  BOOST_REQUIRE(table->dead_letter().has_value());
  BOOST_TEST(*table->dead_letter() == 1u);
  expect(*table, "orders.eu.created", {0}, true);
  expect(*table, "orders.eu", {1}, false);
  expect(*table, "nothing", {1}, false);
}

BOOST_AUTO_TEST_CASE(dead_letter_that_is_also_routed_to) {
  const auto table =
      routing_table::build(make_config({"audit"}, {{"audit.>", {"audit"}}}, "audit"));
  expect(*table, "audit.login", {0}, true);
  expect(*table, "audit", {0}, false);
}

BOOST_AUTO_TEST_CASE(no_match_and_no_dead_letter_is_empty) {
  const auto table = routing_table::build(make_config({"c"}, {{"a", {"c"}}}));
  BOOST_TEST(!table->dead_letter().has_value());
  expect(*table, "b", {}, false);
}

BOOST_AUTO_TEST_CASE(empty_table) {
  const auto table = routing_table::build(routing_rules{});
  BOOST_TEST(table->route_count() == 0u);
  expect(*table, "a.b", {}, false);
}

BOOST_AUTO_TEST_CASE(longest_address) {
  // 128 one-character tokens: 255 bytes, the most a GWP/1 address holds.
  std::string address = "a";
  for (int i = 1; i < 128; ++i)
    address += ".a";
  BOOST_REQUIRE(address.size() == 255u);
  const auto table = routing_table::build(make_config(
      {"tail", "deep", "stars"}, {{"a.>", {"tail"}}, {address, {"deep"}}, {"*.*.*.>", {"stars"}}}));
  expect(*table, address, {0, 1, 2});
  expect(*table, address.substr(0, 253), {0, 2});
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(table)

BOOST_AUTO_TEST_CASE(accessors) {
  auto config =
      make_config({"billing", "audit"},
                  {{"orders.*.created", {"billing", "audit"}}, {"audit.>", {"audit"}}}, "audit");
  const auto table = routing_table::build(config);
  BOOST_TEST(table->route_count() == 2u);
  BOOST_REQUIRE(table->consumers().size() == 2u);
  BOOST_TEST(table->consumers()[0] == "billing");
  BOOST_TEST(table->consumers()[1] == "audit");
  BOOST_TEST(table->find_consumer("audit").value() == 1u);
  BOOST_TEST(!table->find_consumer("nobody").has_value());
  BOOST_TEST((table->rules() == config));
  // root, orders, orders.*, orders.*.created, audit
  BOOST_TEST(table->node_count() == 5u);
}

// Route hit counts are kept by pattern: each route knows its pattern, the same `match` written
// twice is one pattern, and a lookup names every pattern that matched.
// decided_by: the bytes of the address the answer depended on (a prefix ending in '.'), or
// whole when the walk reached its end.
BOOST_AUTO_TEST_CASE(answers_say_which_prefix_decided_them) {
  const auto tail = routing_table::build(make_config({"a"}, {{"t.>", {"a"}}}));
  lookup_scratch scratch;
  BOOST_TEST(tail->lookup("t.x.00000001", scratch).decided_by == 2u);
  BOOST_TEST(tail->lookup("t.x", scratch).decided_by == 2u);
  BOOST_TEST(tail->lookup("t", scratch).decided_by == lookup_result::whole);  // t.> needs more
  BOOST_TEST(tail->lookup("u.x", scratch).decided_by == 2u);  // no route under u: unroutable

  const auto mixed = routing_table::build(
      make_config({"a", "b"}, {{"a.b", {"a"}}, {"*.>", {"b"}}, {"a.*.c", {"a"}}}));
  BOOST_TEST(mixed->lookup("a.b", scratch).decided_by == lookup_result::whole);
  BOOST_TEST(mixed->lookup("q.r.s", scratch).decided_by == 2u);    // "q.": only *.> below
  BOOST_TEST(mixed->lookup("a.x.d.e", scratch).decided_by == 6u);  // "a.x.d.": a.*.c read d
  BOOST_TEST(mixed->lookup("a.x.c", scratch).decided_by == lookup_result::whole);

  const auto everything = routing_table::build(make_config({"a"}, {{">", {"a"}}}));
  BOOST_TEST(everything->lookup("any.thing", scratch).decided_by == 0u);
  BOOST_TEST(everything->lookup("x", scratch).decided_by == 0u);
}

BOOST_AUTO_TEST_CASE(lookups_name_the_patterns_that_matched) {
  const auto table = routing_table::build(make_config({"a", "b"}, {{"orders.*.created", {"a"}},
                                                                   {"orders.>", {"b"}},
                                                                   {"orders.*.created", {"b"}},
                                                                   {"audit.>", {"a"}}}));
  BOOST_TEST(table->pattern_count() == 3u);
  BOOST_TEST(table->route_pattern(0) == table->route_pattern(2));
  BOOST_TEST(table->route_pattern(0) != table->route_pattern(1));
  lookup_scratch scratch;
  const auto r = table->lookup("orders.eu.created", scratch);
  BOOST_TEST(
      sorted(r.patterns) == sorted(std::vector{table->route_pattern(0), table->route_pattern(1)}),
      boost::test_tools::per_element());
  BOOST_TEST(table->lookup("audit.x", scratch).patterns.size() == 1u);
  BOOST_TEST(table->lookup("nobody", scratch).patterns.empty());
}

BOOST_AUTO_TEST_CASE(ids_are_unique) {
  const auto config = make_config({"c"}, {{"a", {"c"}}});
  const auto a = routing_table::build(config);
  const auto b = routing_table::build(config);
  BOOST_TEST(a->id() != b->id());
  BOOST_TEST(a->id() != 0u);
}

BOOST_AUTO_TEST_CASE(build_refuses_what_the_loader_would) {
  BOOST_CHECK_THROW(routing_table::build(make_config({"c"}, {{"a", {"x"}}})),
                    std::invalid_argument);
  BOOST_CHECK_THROW(routing_table::build(make_config({"c"}, {{"a.>.b", {"c"}}})),
                    std::invalid_argument);
  BOOST_CHECK_THROW(routing_table::build(make_config({"c", "c"}, {})), std::invalid_argument);
  BOOST_CHECK_THROW(routing_table::build(make_config({"c"}, {}, "x")), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(warm_lookups_allocate_nothing) {
  const auto table = routing_table::build(make_config(
      {"a", "b", "c", "d"},
      {{"x.>", {"a"}}, {"x.*.z", {"b", "c"}}, {"x.y.z", {"d", "a"}}, {"q", {"a"}}}, "d"));
  lookup_scratch scratch;
  route_cache cache;
  const char* addresses[] = {"x.y.z", "x.q.z", "x.y", "nothing.here", "q"};
  for (const char* a : addresses) {  // warm-up
    table->lookup(a, scratch);
    cache.lookup(*table, a, scratch);
  }
  const auto before = allocation_count.load();
  std::size_t total = 0;
  for (int round = 0; round < 100; ++round) {
    for (const char* a : addresses) {
      total += table->lookup(a, scratch).consumers.size();
      total += cache.lookup(*table, a, scratch).consumers.size();
    }
  }
  BOOST_TEST(allocation_count.load() == before);
  BOOST_TEST(total == 100u * 2 * (4 + 3 + 1 + 1 + 1));
}

BOOST_AUTO_TEST_CASE(concurrent_lookups_with_own_scratch) {
  const auto table = routing_table::build(make_config(
      {"a", "b", "c"}, {{"x.>", {"a"}}, {"x.*", {"b"}}, {"x.y", {"c"}}, {"*.y", {"a", "c"}}}));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      lookup_scratch scratch;
      route_cache cache;
      for (int i = 0; i < 20000; ++i) {
        const auto r =
            (i % 2) ? table->lookup("x.y", scratch) : cache.lookup(*table, "x.y", scratch);
        if (to_vector(r) != indices{0, 1, 2}) ++mismatches;
      }
    });
  }
  for (auto& t : threads)
    t.join();
  BOOST_TEST(mismatches.load() == 0);
}

BOOST_AUTO_TEST_SUITE_END()

// The trie against the reference matcher, over random tables and addresses drawn from a
// small alphabet so that overlaps, wildcards and near misses are frequent.
BOOST_AUTO_TEST_CASE(trie_agrees_with_reference_matcher) {
  std::mt19937 rng{20240601};
  const std::vector<std::string> alphabet = {"a", "b", "c", "dd", "e-1"};
  auto pick = [&](std::size_t n) {
    return std::uniform_int_distribution<std::size_t>{0, n - 1}(rng);
  };
  auto random_address = [&] {
    std::string s;
    const auto tokens = 1 + pick(6);
    for (std::size_t i = 0; i < tokens; ++i) {
      if (i) s += '.';
      s += alphabet[pick(alphabet.size())];
    }
    return s;
  };
  auto random_pattern = [&] {
    std::string s;
    const auto tokens = 1 + pick(5);
    for (std::size_t i = 0; i < tokens; ++i) {
      if (i) s += '.';
      const auto roll = pick(10);
      if (roll < 2) {
        s += '*';
      } else if (roll == 2 && i + 1 == tokens) {
        s += '>';
      } else {
        s += alphabet[pick(alphabet.size())];
      }
    }
    return s;
  };

  std::size_t checked = 0;
  std::size_t matched = 0;
  std::size_t decided_early = 0;
  for (int trial = 0; trial < 8; ++trial) {
    std::vector<std::string> consumers;
    const auto consumer_count = 1 + pick(40);
    for (std::size_t i = 0; i < consumer_count; ++i)
      consumers.push_back(numbered("c", i));
    std::vector<route_def> routes;
    const auto route_count = 1 + pick(trial < 4 ? 30 : 400);
    for (std::size_t i = 0; i < route_count; ++i) {
      route_def r{random_pattern(), {}};
      std::set<std::string> to;
      const auto fan_out = 1 + pick(4);
      for (std::size_t k = 0; k < fan_out; ++k)
        to.insert(consumers[pick(consumers.size())]);
      r.to.assign(to.begin(), to.end());
      routes.push_back(std::move(r));
    }
    const auto table = routing_table::build(make_config(
        consumers, routes, trial % 2 ? std::optional<std::string>{"c0"} : std::nullopt));

    lookup_scratch scratch;
    route_cache cache;
    for (int i = 0; i < 500; ++i) {
      const auto address = random_address();
      const auto want = oracle(*table, address);
      const auto got = table->lookup(address, scratch);
      const bool should_match = !want.empty();
      const indices expected_consumers =
          should_match ? want : (table->dead_letter() ? indices{0} : indices{});
      BOOST_TEST_INFO("trial " << trial << ", address " << address);
      BOOST_TEST(to_vector(got) == expected_consumers, boost::test_tools::per_element());
      BOOST_TEST(got.matched == should_match);
      const auto want_patterns = pattern_oracle(*table, address);
      BOOST_TEST(sorted(got.patterns) == want_patterns, boost::test_tools::per_element());
      const auto cached = cache.lookup(*table, address, scratch);
      BOOST_TEST(to_vector(cached) == expected_consumers, boost::test_tools::per_element());
      BOOST_TEST(cached.matched == should_match);
      BOOST_TEST(sorted(cached.patterns) == want_patterns, boost::test_tools::per_element());
      // What decided the answer decides it for every address that shares it: any tokens in
      // place of the rest give the oracle's same answer, patterns and all, and so does the
      // cache, which answers them from its run.
      if (got.decided_by != lookup_result::whole) {
        ++decided_early;
        BOOST_TEST_REQUIRE(got.decided_by < address.size());
        BOOST_TEST((got.decided_by == 0 || address[got.decided_by - 1] == '.'));
        const auto other = address.substr(0, got.decided_by) + random_address();
        BOOST_TEST_INFO("same prefix: " << other);
        BOOST_TEST(oracle(*table, other) == want, boost::test_tools::per_element());
        BOOST_TEST(pattern_oracle(*table, other) == want_patterns,
                   boost::test_tools::per_element());
        const auto run = cache.lookup(*table, other, scratch);
        BOOST_TEST(to_vector(run) == expected_consumers, boost::test_tools::per_element());
        BOOST_TEST(run.matched == should_match);
        BOOST_TEST(sorted(run.patterns) == want_patterns, boost::test_tools::per_element());
      }
      ++checked;
      if (should_match) ++matched;
    }
  }
  BOOST_TEST(checked == 4000u);
  BOOST_TEST(decided_early > 200u);
  // The test only means something if both outcomes were exercised plenty.
  BOOST_TEST(matched > 400u);
  BOOST_TEST(checked - matched > 400u);
}
