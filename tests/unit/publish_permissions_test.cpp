// publish_permissions: the in-place matcher against the reference matcher, and the rule
// semantics (deny wins, default rule, allow-all fast path).
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "routing/pattern.hpp"
#include "routing/publish_permissions.hpp"

using namespace gatewayd::routing;

BOOST_AUTO_TEST_CASE(in_place_matcher_agrees_with_the_reference) {
  const std::vector<std::string> patterns = {">",   "a",     "a.b", "a.*",   "a.>",
                                             "*.b", "*",     "*.*", "a.*.c", "a.b.>",
                                             "*.>", "a.*.>", "ab",  "a.bc",  "b.>"};
  const std::vector<std::string> addresses = {"a",     "b",     "ab",   "a.b",   "a.c",
                                              "a.bc",  "a.b.c", "x.b",  "a.x.c", "a.b.c.d",
                                              "b.a.b", "a.b.b", "abc.d"};
  for (const auto& p : patterns)
    for (const auto& a : addresses)
      BOOST_TEST(pattern_matches_in_place(p, a) == pattern_matches(p, a),
                 "pattern " << p << " address " << a);
}

BOOST_AUTO_TEST_CASE(deny_wins_and_the_default_applies_to_unknown_identities) {
  const publish_permissions perms(
      {{"orders", "orders-svc", {"orders.>", "audit.*"}, {"orders.internal.>"}},
       {"ro", "reader", {}, {}}},
      {"", "", {"public.>"}, {}});
  const auto orders = perms.rule_for("orders-svc");
  BOOST_TEST(perms.name(orders) == "orders");
  BOOST_TEST(perms.permitted(orders, "orders.eu.created"));
  BOOST_TEST(perms.permitted(orders, "audit.login"));
  BOOST_TEST(!perms.permitted(orders, "audit.login.failed"));
  BOOST_TEST(!perms.permitted(orders, "orders.internal.x"));
  BOOST_TEST(!perms.permitted(orders, "billing.x"));
  BOOST_TEST(!perms.permitted(perms.rule_for("reader"), "orders.x"));  // publish = []: nothing
  for (const char* stranger : {"", "someone-else"}) {
    const auto r = perms.rule_for(stranger);
    BOOST_TEST(r == publish_permissions::default_rule);
    BOOST_TEST(perms.permitted(r, "public.news"));
    BOOST_TEST(!perms.permitted(r, "orders.eu.created"));
  }
  BOOST_TEST(!perms.allows_all(orders));
}

BOOST_AUTO_TEST_CASE(the_default_default_allows_everything) {
  const publish_permissions perms({}, {"", "", {">"}, {}});
  BOOST_TEST(perms.allows_all(publish_permissions::default_rule));
  BOOST_TEST(perms.permitted(perms.rule_for("anyone"), "any.address"));
  const publish_permissions denying({}, {"", "", {">"}, {"secret.>"}});
  BOOST_TEST(!denying.allows_all(publish_permissions::default_rule));
  BOOST_TEST(!denying.permitted(publish_permissions::default_rule, "secret.x"));
  BOOST_TEST(denying.permitted(publish_permissions::default_rule, "open.x"));
}

// The not_permitted counters live by rule name in one registry that every version of the
// permissions shares: a reload neither resets nor doubles them, and a removed rule keeps its
// count (and an in-flight pass on the old version still lands in it).
BOOST_AUTO_TEST_CASE(drop_counters_are_by_rule_name_and_survive_a_reload) {
  auto counters = std::make_shared<publish_drop_counters>();
  const auto values = [&] {
    std::map<std::string, std::uint64_t> m;
    for (const auto& [name, v] : counters->values())
      m[name] = v;
    return m;
  };
  const publish_permissions v1({{"orders", "orders-svc", {"orders.>"}, {}},
                                {"billing", "billing.internal", {"billing.>"}, {}}},
                               {"", "", {}, {}}, counters);
  BOOST_TEST((values() ==
              std::map<std::string, std::uint64_t>{{"billing", 0}, {"default", 0}, {"orders", 0}}));
  v1.count_not_permitted(v1.rule_for("orders-svc"), 2);
  v1.count_not_permitted(v1.rule_for("billing.internal"), 5);
  v1.count_not_permitted(v1.rule_for("someone-else"), 1);
  const publish_permissions v2({{"orders", "orders-svc", {"orders.>"}, {}}}, {"", "", {}, {}},
                               counters);
  v2.count_not_permitted(v2.rule_for("orders-svc"), 1);
  v2.count_not_permitted(v2.rule_for("billing.internal"), 3);  // now under the default rule
  v1.count_not_permitted(v1.rule_for("billing.internal"), 1);  // a pass still on v1
  BOOST_TEST((values() ==
              std::map<std::string, std::uint64_t>{{"billing", 6}, {"default", 4}, {"orders", 3}}));
}
