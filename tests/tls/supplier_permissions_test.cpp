// Publish permissions end to end: suppliers identified by their client certificates (mTLS)
// publish what [suppliers.NAME] allows, deny wins, the default rule covers everyone else, and
// the rules reload with the routing table; a refused frame is counted and the connection stays.
#include <boost/test/unit_test.hpp>

#include <csignal>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "protocol/frame_codec.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"
#include "tests/support/tls_peers.hpp"

using namespace gatewayd::test;
using namespace std::chrono_literals;

namespace {

// The not_permitted drops of one [suppliers.NAME] rule ("default": [suppliers_default]).
std::string dropped(const std::string& supplier) {
  return "gatewayd_supplier_dropped_messages_total{supplier=\"" + supplier +
         "\",reason=\"not_permitted\"}";
}

// routes.toml: everything to the sink; orders-svc may publish orders.> and audit.* but not
// orders.internal.>, everyone else what `fallback` lists.
std::string orders_and_default(const std::string& sink, const std::string& fallback) {
  return consumer_toml("sink", sink) + route_toml(">", {"sink"}) +
         "[suppliers.orders]\nidentity = \"orders-svc\"\n"
         "publish = [\"orders.>\", \"audit.*\"]\ndeny = [\"orders.internal.>\"]\n"
         "[suppliers_default]\npublish = [" +
         fallback + "]\n";
}

}  // namespace

BOOST_AUTO_TEST_CASE(publish_permissions_by_identity_allow_deny_and_default_deny) {
  pki p;
  test_consumer sink;
  const auto routes = [&](const std::string& fallback) {
    return orders_and_default(sink.endpoint(), fallback);
  };
  gateway_fixture gw(routes(""), "", {}, true, p.tls_table(true));
  BOOST_TEST_REQUIRE(sink.wait_for_connections(1, 5s));
  const auto send = [](tls_supplier& s, const std::string& address, const std::string& body) {
    BOOST_TEST_REQUIRE(!s.send(gatewayd::protocol::encode_frame(address, body)));
  };
  tls_supplier orders(p, "orders");
  BOOST_TEST_REQUIRE(!orders.connect(gw.supplier_port));
  send(orders, "orders.eu.created", "1");
  send(orders, "orders.internal.audit", "denied: deny wins over orders.>");
  send(orders, "audit.login", "2");
  send(orders, "audit.login.failed", "denied: * is one token");
  send(orders, "billing.x", "denied: not in publish");
  tls_supplier billing(p, "billing");  // identity billing.internal: no [suppliers.*] names it
  BOOST_TEST_REQUIRE(!billing.connect(gw.supplier_port));
  send(billing, "orders.eu.created", "denied: default-deny");
  BOOST_TEST(wait_metric(gw.metrics_port, dropped("orders"), 3) == 3);
  BOOST_TEST(wait_metric(gw.metrics_port, dropped("default"), 1) == 1);
  send(orders, "orders.us.created", "3");  // the connection stayed
  BOOST_TEST_REQUIRE(sink.wait_for_count(3, 5s));
  std::vector<std::string> got;
  for (const auto& f : sink.frames())
    got.push_back(f.address + "|" + f.payload);
  BOOST_TEST(got == (std::vector<std::string>{"orders.eu.created|1", "audit.login|2",
                                              "orders.us.created|3"}),
             boost::test_tools::per_element());
  BOOST_TEST(gw.daemon->count_in_log("not_permitted") >= 1u);

  // The default now lets billing.> through: the rules reload with the routing table.
  gw.dir.write("routes.toml", routes("\"billing.>\""));
  gw.daemon->signal(SIGHUP);
  BOOST_TEST_REQUIRE(
      wait_metric(gw.metrics_port, "gatewayd_config_reloads_total{result=\"success\"}", 1) >= 1);
  send(billing, "billing.invoice", "4");
  send(billing, "orders.eu.created", "denied still");
  BOOST_TEST(sink.wait_for_count(4, 5s));
  BOOST_TEST(sink.frames().back().payload == "4");
  BOOST_TEST(wait_metric(gw.metrics_port, dropped("default"), 2) == 2);
  BOOST_TEST(scrape_metric(gw.metrics_port, dropped("orders")) == 3);
}

// Two identities with a rule each are counted apart, under their rules' names, never under the
// certificate's identity. A reload that removes a rule keeps its count (the series stays,
// monotonic, until a restart) and the supplier's next refusals count under the rule it now
// falls under: nothing lost, nothing counted twice.
BOOST_AUTO_TEST_CASE(not_permitted_is_counted_by_supplier_rule_across_a_reload) {
  pki p;
  test_consumer sink;
  const std::string orders_rule =
      "[suppliers.orders]\nidentity = \"orders-svc\"\npublish = [\"orders.>\"]\n";
  const std::string billing_rule =
      "[suppliers.billing]\nidentity = \"billing.internal\"\npublish = [\"billing.>\"]\n";
  const std::string base = consumer_toml("sink", sink.endpoint()) + route_toml(">", {"sink"});
  gateway_fixture gw(base + orders_rule + billing_rule, "", {}, true, p.tls_table(true));
  BOOST_TEST_REQUIRE(sink.wait_for_connections(1, 5s));
  BOOST_TEST(scrape_metric(gw.metrics_port, dropped("orders")) == 0);  // exported from the start
  BOOST_TEST(scrape_metric(gw.metrics_port, dropped("billing")) == 0);
  BOOST_TEST(scrape_metric(gw.metrics_port, dropped("default")) == 0);
  tls_supplier orders(p, "orders");
  BOOST_TEST_REQUIRE(!orders.connect(gw.supplier_port));
  tls_supplier billing(p, "billing");
  BOOST_TEST_REQUIRE(!billing.connect(gw.supplier_port));
  std::string two, five;
  for (int i = 0; i < 2; ++i)
    two += gatewayd::protocol::encode_frame("billing.x", "denied to orders");
  for (int i = 0; i < 5; ++i)
    five += gatewayd::protocol::encode_frame("orders.x", "denied to billing");
  BOOST_TEST_REQUIRE(!orders.send(two));
  BOOST_TEST_REQUIRE(!billing.send(five));
  BOOST_TEST_REQUIRE(!orders.send(gatewayd::protocol::encode_frame("orders.ok", "1")));
  BOOST_TEST_REQUIRE(!billing.send(gatewayd::protocol::encode_frame("billing.ok", "2")));
  BOOST_TEST_REQUIRE(sink.wait_for_count(2, 5s));
  BOOST_TEST(wait_metric(gw.metrics_port, dropped("orders"), 2) == 2);
  BOOST_TEST(wait_metric(gw.metrics_port, dropped("billing"), 5) == 5);
  BOOST_TEST(scrape_metric(gw.metrics_port, dropped("default")) == 0);
  BOOST_TEST(scrape_metric(gw.metrics_port, dropped("orders-svc")) == -1);  // no identity label

  // [suppliers.billing] removed: billing.internal falls under the default rule ([">"]).
  gw.dir.write("routes.toml", base + orders_rule + "[suppliers_default]\npublish = [\"ok\"]\n");
  gw.daemon->signal(SIGHUP);
  BOOST_TEST_REQUIRE(
      wait_metric(gw.metrics_port, "gatewayd_config_reloads_total{result=\"success\"}", 1) >= 1);
  BOOST_TEST_REQUIRE(!billing.send(five));
  BOOST_TEST_REQUIRE(!billing.send(gatewayd::protocol::encode_frame("ok", "3")));
  BOOST_TEST_REQUIRE(sink.wait_for_count(3, 5s));
  BOOST_TEST(wait_metric(gw.metrics_port, dropped("default"), 5) == 5);
  BOOST_TEST(scrape_metric(gw.metrics_port, dropped("billing")) == 5);  // kept, not lost
  BOOST_TEST(scrape_metric(gw.metrics_port, dropped("orders")) == 2);
}

// Suppliers that mix as many addresses as the router's memo of answers holds (four ways), and a
// fifth now and then that evicts one, two rules taking turns on the gateway's one thread, and a
// reload between rounds: every frame gets its own rule's answer for its own table. A memo that
// answered for another rule or table would let a refused frame through or drop a permitted one.
BOOST_AUTO_TEST_CASE(mixed_addresses_get_their_own_rules_answer_in_turn_and_after_a_reload) {
  pki p;
  test_consumer sink;
  const auto routes = [&](const std::string& fallback) {
    return orders_and_default(sink.endpoint(), fallback);
  };
  gateway_fixture gw(routes("\"billing.>\""), "threads = 1\n", {}, true, p.tls_table(true));
  BOOST_TEST_REQUIRE(sink.wait_for_connections(1, 5s));
  tls_supplier orders(p, "orders");
  BOOST_TEST_REQUIRE(!orders.connect(gw.supplier_port));
  tls_supplier other(p, "billing");  // no [suppliers.*] names it: the default rule
  BOOST_TEST_REQUIRE(!other.connect(gw.supplier_port));
  const std::vector<std::string> addresses = {"orders.a", "audit.x", "orders.internal.z",
                                              "billing.q"};
  // Expected per supplier and round: the rule's answer for each address, in order.
  std::map<std::string, std::vector<std::string>> expected;
  std::map<std::string, double> refused;  // by rule name
  const auto round = [&](tls_supplier& s, const std::string& who, int r,
                         const std::function<bool(const std::string&)>& allowed) {
    std::string frames;
    // 56 frames: a round ends on eleven frames of the four addresses, so the memo the next
    // round finds holds all four, with this rule's answers.
    for (int i = 0; i < 56; ++i) {
      const std::string& a =
          i % 15 == 14 ? "audit.y.z" : addresses[static_cast<std::size_t>(i) % addresses.size()];
      const std::string body = who + ":" + std::to_string(r) + ":" + std::to_string(i);
      frames += gatewayd::protocol::encode_frame(a, body);
      if (allowed(a)) {
        expected[who].push_back(a + "|" + body);
      } else {
        ++refused[who == "o" ? "orders" : "default"];
      }
    }
    BOOST_TEST_REQUIRE(!s.send(frames));
  };
  const auto by_orders = [](const std::string& a) { return a == "orders.a" || a == "audit.x"; };
  std::function<bool(const std::string&)> by_default = [](const std::string& a) {
    return a == "billing.q";
  };
  for (int r = 0; r < 5; ++r) {
    round(orders, "o", r, by_orders);
    round(other, "d", r, by_default);
  }
  BOOST_TEST_REQUIRE(sink.wait_for_count(expected["o"].size() + expected["d"].size(), 5s));

  // The default rule now allows audit.* and nothing of billing: the old answers must go.
  gw.dir.write("routes.toml", routes("\"audit.*\""));
  gw.daemon->signal(SIGHUP);
  BOOST_TEST_REQUIRE(
      wait_metric(gw.metrics_port, "gatewayd_config_reloads_total{result=\"success\"}", 1) >= 1);
  by_default = [](const std::string& a) { return a == "audit.x"; };
  for (int r = 5; r < 10; ++r) {
    round(other, "d", r, by_default);
    round(orders, "o", r, by_orders);
  }
  const std::size_t total = expected["o"].size() + expected["d"].size();
  BOOST_TEST_REQUIRE(sink.wait_for_count(total, 5s), "got " << sink.frames().size());
  std::map<std::string, std::vector<std::string>> got;
  for (const auto& f : sink.frames())
    got[f.payload.substr(0, 1)].push_back(f.address + "|" + f.payload);
  BOOST_TEST(got["o"] == expected["o"], boost::test_tools::per_element());
  BOOST_TEST(got["d"] == expected["d"], boost::test_tools::per_element());
  for (const auto& [rule, n] : refused)
    BOOST_TEST(wait_metric(gw.metrics_port, dropped(rule), n) == n, rule);
}
