// [suppliers.NAME] and [suppliers_default] in routes.toml: read into the publish rules, and every
// mistake in them reported with its position (the rules themselves: publish_permissions_test).
#include <boost/test/unit_test.hpp>

#include <string>

#include "config/routes_loader.hpp"

using namespace gatewayd::config;

BOOST_AUTO_TEST_CASE(publish_permissions_are_read_and_checked) {
  const auto ok = parse_routes_config(R"(
[suppliers.orders]
identity = "orders-svc"
publish = ["orders.>"]
deny = ["orders.internal.>"]
[suppliers_default]
publish = []
)",
                                      "routes.toml");
  BOOST_TEST_REQUIRE(ok.errors.empty());
  BOOST_TEST_REQUIRE(ok.config->suppliers.size() == 1u);
  BOOST_TEST(ok.config->suppliers[0].name == "orders");
  BOOST_TEST(ok.config->suppliers[0].identity == "orders-svc");
  BOOST_TEST(ok.config->suppliers[0].publish == std::vector<std::string>{"orders.>"});
  BOOST_TEST(ok.config->suppliers[0].deny == std::vector<std::string>{"orders.internal.>"});
  BOOST_TEST(ok.config->suppliers_default.publish.empty());

  const auto absent = parse_routes_config("", "routes.toml");
  BOOST_TEST_REQUIRE(absent.errors.empty());
  BOOST_TEST(absent.config->suppliers_default.publish == std::vector<std::string>{">"});

  const auto bad = parse_routes_config(R"(
[suppliers.a]
identity = "x"
publish = ["a.>.b", 3]
[suppliers.b]
identity = "x"
colour = 1
)",
                                       "routes.toml");
  std::string all;
  for (const auto& e : bad.errors)
    all += e.to_string() + "\n";
  BOOST_TEST(bad.errors.size() == 4u, all);
  BOOST_TEST(all.find("suppliers.a.publish[0]: invalid pattern") != std::string::npos, all);
  BOOST_TEST(all.find("suppliers.a.publish[1]: expected a pattern") != std::string::npos, all);
  BOOST_TEST(all.find("suppliers.b.identity: \"x\" is already") != std::string::npos, all);
  BOOST_TEST(all.find("suppliers.b.colour: unknown key") != std::string::npos, all);
}

// "default" labels [suppliers_default]'s drops: a [suppliers.default] would share its series.
BOOST_AUTO_TEST_CASE(a_supplier_may_not_be_named_default) {
  const auto bad = parse_routes_config("[suppliers.default]\nidentity = \"x\"\n", "routes.toml");
  BOOST_TEST_REQUIRE(bad.errors.size() == 1u);
  BOOST_TEST(bad.errors[0].to_string().find("suppliers.default: \"default\" is the label") !=
                 std::string::npos,
             bad.errors[0].to_string());
}
