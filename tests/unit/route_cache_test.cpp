// The per-thread route cache in front of the trie: hits, misses, eviction, invalidation by
// table id, the bypass for wide results and long addresses, and the publish answers kept beside
// the routes (per rule, never answering for another).
#include <boost/test/unit_test.hpp>

#include <malloc.h>

#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "routing/publish_permissions.hpp"
#include "routing/route_cache.hpp"
#include "routing/routing_table.hpp"
#include "tests/support/routing_rules.hpp"

using namespace gatewayd::routing;
using namespace gatewayd::test;

BOOST_AUTO_TEST_SUITE(cache)

BOOST_AUTO_TEST_CASE(hits_and_misses) {
  const auto table =
      routing_table::build(make_config({"a", "b"}, {{"x.*", {"a"}}, {"x.y", {"b"}}}, "b"));
  lookup_scratch scratch;
  route_cache cache;
  auto r = cache.lookup(*table, "x.y", scratch);
  BOOST_TEST(to_vector(r) == (indices{0, 1}), boost::test_tools::per_element());
  BOOST_TEST(r.matched);
  BOOST_TEST(cache.hits() == 0u);
  BOOST_TEST(cache.misses() == 1u);
  r = cache.lookup(*table, "x.y", scratch);
  BOOST_TEST(to_vector(r) == (indices{0, 1}), boost::test_tools::per_element());
  BOOST_TEST(cache.hits() == 1u);
  r = cache.lookup(*table, "nope", scratch);
  BOOST_TEST(to_vector(r) == (indices{1}), boost::test_tools::per_element());
  BOOST_TEST(!r.matched);
  r = cache.lookup(*table, "nope", scratch);
  BOOST_TEST(!r.matched);  // a cached miss keeps its flag
  BOOST_TEST(to_vector(r) == (indices{1}), boost::test_tools::per_element());
  BOOST_TEST(cache.hits() == 2u);
  BOOST_TEST(cache.misses() == 2u);
}

BOOST_AUTO_TEST_CASE(same_length_addresses_do_not_collide) {
  const auto table =
      routing_table::build(make_config({"a", "b"}, {{"k.a", {"a"}}, {"k.b", {"b"}}}));
  lookup_scratch scratch;
  route_cache cache;
  // Far more distinct addresses than entries: evictions and slot sharing must never
  // return another address's answer.
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 1000; ++i) {
      const std::string address = (i % 2 ? "k.a" : "k.b") + std::string{"."} + std::to_string(i);
      BOOST_TEST(cache.lookup(*table, address, scratch).consumers.empty());
      const std::string direct = i % 2 ? "k.a" : "k.b";
      const auto r = cache.lookup(*table, direct, scratch);
      BOOST_REQUIRE(r.consumers.size() == 1u);
      BOOST_TEST(r.consumers[0] == (i % 2 ? 0u : 1u));
    }
  }
  BOOST_TEST(cache.hits() > 0u);
}

BOOST_AUTO_TEST_CASE(a_new_table_invalidates) {
  const auto first = routing_table::build(make_config({"a", "b"}, {{"x", {"a"}}}));
  const auto second = routing_table::build(make_config({"a", "b"}, {{"x", {"b"}}}));
  lookup_scratch scratch;
  route_cache cache;
  BOOST_TEST(cache.lookup(*first, "x", scratch).consumers[0] == 0u);
  BOOST_TEST(cache.lookup(*first, "x", scratch).consumers[0] == 0u);
  BOOST_TEST(cache.hits() == 1u);
  BOOST_TEST(cache.lookup(*second, "x", scratch).consumers[0] == 1u);
  BOOST_TEST(cache.hits() == 1u);
  BOOST_TEST(cache.lookup(*second, "x", scratch).consumers[0] == 1u);
  BOOST_TEST(cache.hits() == 2u);
}

BOOST_AUTO_TEST_CASE(a_table_at_a_reused_address_still_invalidates) {
  // A freed table's memory may hold the next one: the cache must key on id(), not on the
  // table's address.
  lookup_scratch scratch;
  route_cache cache;
  auto table = routing_table::build(make_config({"a", "b"}, {{"x", {"a"}}}));
  BOOST_TEST(cache.lookup(*table, "x", scratch).consumers[0] == 0u);
  table.reset();
  table = routing_table::build(make_config({"a", "b"}, {{"x", {"b"}}}));
  BOOST_TEST(cache.lookup(*table, "x", scratch).consumers[0] == 1u);
}

BOOST_AUTO_TEST_CASE(addresses_one_byte_apart_never_share_an_answer) {
  // The last hit is tried first and the bytes are compared a word at a time (the last word
  // overlapping): an address one byte away from the last hit, at any position and any length
  // up to the cache's limit, must get its own answer, straight after it and on a re-probe.
  std::vector<route_def> routes;
  std::vector<std::pair<std::string, std::string>> pairs;  // (base, one byte changed)
  for (std::size_t n = 1; n <= route_cache::max_address_length; ++n) {
    const std::string base(n, 'a');
    routes.push_back({base, {"a"}});
    for (std::size_t k = 0; k < n; ++k) {
      std::string other = base;
      other[k] = 'b';
      routes.push_back({other, {"b"}});
      pairs.emplace_back(base, other);
    }
  }
  const auto table = routing_table::build(make_config({"a", "b"}, routes));
  lookup_scratch scratch;
  route_cache cache;
  for (int round = 0; round < 2; ++round) {
    for (const auto& [base, other] : pairs) {
      for (const std::string* address : {&base, &other, &other, &base}) {
        const auto r = cache.lookup(*table, *address, scratch);
        BOOST_REQUIRE(r.consumers.size() == 1u);
        BOOST_TEST(r.consumers[0] == (address == &base ? 0u : 1u), *address);
      }
    }
  }
  BOOST_TEST(cache.hits() > cache.misses());
}

BOOST_AUTO_TEST_CASE(wide_results_and_long_addresses_bypass) {
  std::vector<std::string> names;
  for (int i = 0; i < 10; ++i)
    names.push_back(numbered("c", i));
  const std::string long_address(route_cache::max_address_length + 1, 'l');
  const auto table = routing_table::build(
      make_config(names, {{"wide", names}, {long_address, {"c3"}}, {"short", {"c4"}}}));
  lookup_scratch scratch;
  route_cache cache;
  for (int i = 0; i < 3; ++i) {
    BOOST_TEST(cache.lookup(*table, "wide", scratch).consumers.size() == 10u);
    const auto r = cache.lookup(*table, long_address, scratch);
    BOOST_TEST(to_vector(r) == (indices{3}), boost::test_tools::per_element());
  }
  BOOST_TEST(cache.hits() == 0u);
  BOOST_TEST(cache.misses() == 6u);
  cache.lookup(*table, "short", scratch);
  cache.lookup(*table, "short", scratch);
  BOOST_TEST(cache.hits() == 1u);
}

BOOST_AUTO_TEST_CASE(hot_addresses_stay_cached) {
  // A session cycling over a few addresses must hit every time once warm, whatever sets
  // they hash to (hot.* needs the whole address: no run answers them).
  const auto table = routing_table::build(make_config({"a"}, {{"hot.*", {"a"}}}));
  std::vector<std::string> hot;
  for (std::size_t i = 0; i < 12; ++i)
    hot.push_back(numbered("hot.address-", i));
  lookup_scratch scratch;
  route_cache cache;
  for (const auto& a : hot)
    cache.lookup(*table, a, scratch);
  BOOST_TEST(cache.misses() == hot.size());
  for (int round = 0; round < 10; ++round) {
    for (const auto& a : hot)
      BOOST_TEST(cache.lookup(*table, a, scratch).matched);
  }
  BOOST_TEST(cache.hits() == 10 * hot.size());
  BOOST_TEST(cache.misses() == hot.size());
}

BOOST_AUTO_TEST_CASE(a_run_answers_every_address_its_prefix_decided) {
  // t.> decides t.x.N by its first token: one walk, then the run answers the rest, however
  // many distinct addresses follow.
  const auto table = routing_table::build(
      make_config({"a", "b"}, {{"t.>", {"a"}}, {"u.v", {"b"}}}, std::string{"b"}));
  lookup_scratch scratch;
  route_cache cache;
  for (int i = 0; i < 1000; ++i) {
    const auto r = cache.lookup(*table, numbered("t.x.", i), scratch);
    BOOST_TEST(to_vector(r) == (indices{0}), boost::test_tools::per_element());
    BOOST_TEST(r.matched);
  }
  BOOST_TEST(cache.misses() == 1u);
  // Addresses the prefix does not cover get their own answers; the run stays.
  BOOST_TEST(to_vector(cache.lookup(*table, "u.v", scratch)) == (indices{1}),
             boost::test_tools::per_element());
  for (const char* other : {"t", "tx.y", "u.w.z"}) {
    const auto r = cache.lookup(*table, other, scratch);
    BOOST_TEST(!r.matched, other);  // the dead letter
    BOOST_TEST(to_vector(r) == (indices{1}), boost::test_tools::per_element());
  }
  const auto misses = cache.misses();
  BOOST_TEST(cache.lookup(*table, "t.q", scratch).matched);
  BOOST_TEST(cache.misses() == misses);
}

// A reload publishes a new table: the run and every entry of the old one go, so a cached
// address sees the route change at once.
BOOST_AUTO_TEST_CASE(a_route_change_is_seen_by_cached_addresses_and_the_run) {
  const auto before =
      routing_table::build(make_config({"a", "b"}, {{"t.>", {"a"}}, {"e.x", {"a"}}}));
  const auto after = routing_table::build(
      make_config({"a", "b"}, {{"t.x.>", {"b"}}, {"t.>", {"a"}}, {"e.x", {"b"}}}));
  lookup_scratch scratch;
  route_cache cache;
  for (int i = 0; i < 3; ++i) {
    BOOST_TEST(to_vector(cache.lookup(*before, "t.x.1", scratch)) == (indices{0}),
               boost::test_tools::per_element());
    BOOST_TEST(to_vector(cache.lookup(*before, "e.x", scratch)) == (indices{0}),
               boost::test_tools::per_element());
  }
  BOOST_TEST(cache.hits() == 4u);
  BOOST_TEST(to_vector(cache.lookup(*after, "t.x.1", scratch)) == (indices{0, 1}),
             boost::test_tools::per_element());
  BOOST_TEST(to_vector(cache.lookup(*after, "t.y.1", scratch)) == (indices{0}),
             boost::test_tools::per_element());
  BOOST_TEST(to_vector(cache.lookup(*after, "t.x.2", scratch)) == (indices{0, 1}),
             boost::test_tools::per_element());
  BOOST_TEST(to_vector(cache.lookup(*after, "e.x", scratch)) == (indices{1}),
             boost::test_tools::per_element());
  // And back: the old table's answers are not kept under its id either.
  BOOST_TEST(to_vector(cache.lookup(*before, "t.x.3", scratch)) == (indices{0}),
             boost::test_tools::per_element());
}

// The run answers routes only: a supplier whose publish rule must be asked gets the rule's
// answer for each whole address.
BOOST_AUTO_TEST_CASE(a_publish_rule_is_asked_past_the_run) {
  const auto table = routing_table::build(make_config({"a"}, {{"t.>", {"a"}}}));
  const publish_permissions perms({{"svc", "svc-id", {"t.>"}, {"t.secret.>"}}}, {"", "", {}, {}});
  const publish_check svc{&perms, perms.rule_for("svc-id")};
  lookup_scratch scratch;
  route_cache cache;
  BOOST_TEST(cache.lookup(*table, "t.ok.1", scratch).matched);  // starts the run
  for (int i = 0; i < 3; ++i) {
    BOOST_TEST(!cache.lookup(*table, "t.secret.1", scratch, svc).permitted);
    BOOST_TEST(cache.lookup(*table, "t.ok.2", scratch, svc).permitted);
    BOOST_TEST(cache.lookup(*table, "t.secret.2", scratch, publish_check{}).permitted);
  }
}

// Hostile: far more distinct addresses than any cache holds, walked (m.*: no run) and run
// (r.>): the heap must not grow with them.
BOOST_AUTO_TEST_CASE(a_million_distinct_addresses_keep_memory_bounded) {
  const auto table = routing_table::build(
      make_config({"a", "b"}, {{"m.*", {"a"}}, {"r.>", {"b"}}}, std::string{"b"}));
  lookup_scratch scratch;
  route_cache cache;
  cache.lookup(*table, "m.warm", scratch);  // the entries and the scratch, allocated once
  const auto heap = [] { return mallinfo2().uordblks; };
  const std::size_t before = heap();
  std::string address;
  for (std::size_t i = 0; i < 1'000'000; ++i) {
    address = (i % 4 ? "r.x." : "m.") + std::to_string(i * 2654435761u % 1'000'003u);
    const auto r = cache.lookup(*table, address, scratch);
    BOOST_REQUIRE(r.consumers.size() == 1u);
    BOOST_REQUIRE(r.consumers[0] == (i % 4 ? 1u : 0u));
  }
  BOOST_TEST(heap() <= before + 4096);
  BOOST_TEST(cache.misses() > 250'000u);  // the m.* addresses each walked
}

// Every way the cache answers (the last hit, the entry after it, a run, the run tried first
// after a run answered, the hash probe) against the table and the rule themselves: random
// addresses over a few tokens, for a supplier with no rule and one with a rule to ask, over
// wildcard routes that decide by a prefix (runs) and exact ones inside them (no run), in runs
// of one address, cycles and spreads.
BOOST_AUTO_TEST_CASE(every_way_of_answering_agrees_with_the_table) {
  const auto table = routing_table::build(make_config({"a", "b", "c"},
                                                      {{"t.>", {"a"}},
                                                       {"t.x.*", {"b"}},
                                                       {"t.x.1", {"c"}},
                                                       {"u.*.z", {"a", "c"}},
                                                       {"v.>", {"b"}},
                                                       {"w", {"c"}}},
                                                      std::string{"c"}));
  const publish_permissions perms({{"svc", "svc-id", {"t.>", "v.>"}, {"t.x.2"}}}, {"", "", {}, {}});
  const publish_check ruled{&perms, perms.rule_for("svc-id")};
  const char* tokens[] = {"t", "u", "v", "w", "x", "z", "1", "2", "33333333"};
  std::mt19937 rng(45);
  lookup_scratch scratch, reference_scratch;
  route_cache cache;
  const auto random_address = [&] {
    std::string a;
    for (std::size_t n = 1 + rng() % 4; n > 0; --n)
      a += (a.empty() ? "" : ".") + std::string(tokens[rng() % std::size(tokens)]);
    return a;
  };
  std::string address = "t.x.1";
  std::vector<std::string> cycle;
  std::size_t lookups = 0;
  // Stretches of one shape, 1 to 40 lookups each, so that a cycle's order and a run are learnt
  // and then broken.
  while (lookups < 50'000) {
    const unsigned shape = rng() % 4;
    if (shape == 1) {
      cycle.clear();
      for (std::size_t n = 2 + rng() % 4; n > 0; --n)
        cycle.push_back(random_address());
    }
    const publish_check who = rng() % 3 == 0 ? ruled : publish_check{};
    for (std::size_t k = 0, stretch = 1 + rng() % 40; k < stretch; ++k, ++lookups) {
      if (shape == 0) {
        address = random_address();  // a new address each time
      } else if (shape == 1) {
        address = cycle[k % cycle.size()];  // a few in turn
      } else if (shape == 2) {
        address = "t.x." + std::to_string(rng() % 100'000);  // a spread under one prefix
      }                                                      // else: the same address again
      const auto got = cache.lookup(*table, address, scratch, who);
      const auto want = table->lookup(address, reference_scratch);
      BOOST_TEST_REQUIRE(to_vector(got.route) == to_vector(want), address);
      BOOST_TEST_REQUIRE(got.route.matched == want.matched, address);
      BOOST_TEST_REQUIRE(got.permitted == (!who.permissions || perms.permitted(who.rule, address)),
                         address);
    }
  }
  BOOST_TEST(cache.hits() > 25'000u);  // the shortcuts were taken, not only the walk
}

BOOST_AUTO_TEST_CASE(clear_forgets) {
  const auto table = routing_table::build(make_config({"a"}, {{"x", {"a"}}}));
  lookup_scratch scratch;
  route_cache cache;
  cache.clear();  // before any lookup: nothing to do, nothing to break
  cache.lookup(*table, "x", scratch);
  cache.clear();
  cache.lookup(*table, "x", scratch);
  BOOST_TEST(cache.hits() == 0u);
  BOOST_TEST(cache.misses() == 2u);
}

BOOST_AUTO_TEST_CASE(publish_answers_are_kept_per_rule_beside_the_route) {
  const auto table = routing_table::build(
      make_config({"a"}, {{"orders.>", {"a"}}, {"audit.>", {"a"}}}, std::nullopt));
  const publish_permissions perms({{"orders", "orders-svc", {"orders.>"}, {}},
                                   {"audit", "audit-svc", {"audit.>"}, {"audit.secret"}}},
                                  {"", "", {}, {}});
  const publish_check orders{&perms, perms.rule_for("orders-svc")};
  const publish_check audit{&perms, perms.rule_for("audit-svc")};
  lookup_scratch scratch;
  route_cache cache;
  // The same cached entry answers each rule for itself, in any order, again and again.
  for (int round = 0; round < 3; ++round) {
    BOOST_TEST_CONTEXT("round " << round) {
      BOOST_TEST(cache.lookup(*table, "orders.eu", scratch, orders).permitted);
      BOOST_TEST(!cache.lookup(*table, "orders.eu", scratch, audit).permitted);
      BOOST_TEST(cache.lookup(*table, "audit.login", scratch, audit).permitted);
      BOOST_TEST(!cache.lookup(*table, "audit.login", scratch, orders).permitted);
      BOOST_TEST(!cache.lookup(*table, "audit.secret", scratch, audit).permitted);  // deny wins
      BOOST_TEST(cache.lookup(*table, "audit.secret", scratch, publish_check{}).permitted);
      const auto r = cache.lookup(*table, "orders.eu", scratch, audit);
      BOOST_TEST(r.route.matched);  // refused or not, the route is the table's
      BOOST_TEST(to_vector(r.route) == (indices{0}), boost::test_tools::per_element());
    }
  }
  BOOST_TEST(cache.misses() == 3u);  // one per address: the rules share the entries

  // New rules with the same table: the old answers must go.
  const publish_permissions swapped({{"orders", "orders-svc", {"audit.>"}, {}}}, {"", "", {}, {}});
  cache.forget_permissions();
  const publish_check now{&swapped, swapped.rule_for("orders-svc")};
  BOOST_TEST(now.rule == orders.rule);  // same rule number, other patterns
  BOOST_TEST(!cache.lookup(*table, "orders.eu", scratch, now).permitted);
  BOOST_TEST(cache.lookup(*table, "audit.login", scratch, now).permitted);

  // Addresses too long to cache are asked every time, and answered right.
  const std::string long_address = "orders." + std::string(route_cache::max_address_length, 'x');
  BOOST_TEST(cache.lookup(*table, long_address, scratch, orders).permitted);
  BOOST_TEST(!cache.lookup(*table, long_address, scratch, audit).permitted);
}

BOOST_AUTO_TEST_SUITE_END()
