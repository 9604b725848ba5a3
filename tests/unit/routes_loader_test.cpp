#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "config/routes_loader.hpp"
#include "routing/routing_table.hpp"

using namespace gatewayd::config;

namespace {

struct expected_error {
  std::uint32_t line;
  std::uint32_t column;
  std::string message;  // the exact message
};

routes_load_result load(const std::string& text) {
  return parse_routes_config(text, "routes.toml");
}

// Checks that `text` yields exactly `want`, in this order, and no config.
void expect_errors(const std::string& text, const std::vector<expected_error>& want) {
  const auto result = load(text);
  BOOST_TEST(!result.config.has_value());
  BOOST_TEST_REQUIRE(result.errors.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    BOOST_TEST_INFO("error " << i << ": " << result.errors[i].to_string());
    BOOST_TEST(result.errors[i].file == "routes.toml");
    BOOST_TEST_INFO("error " << i << ": " << result.errors[i].to_string());
    BOOST_TEST(result.errors[i].line == want[i].line);
    BOOST_TEST_INFO("error " << i << ": " << result.errors[i].to_string());
    BOOST_TEST(result.errors[i].column == want[i].column);
    BOOST_TEST(result.errors[i].message == want[i].message);
  }
}

void expect_error(const std::string& text, std::uint32_t line, std::uint32_t column,
                  const std::string& message) {
  expect_errors(text, {{line, column, message}});
}

const std::string two_consumers = R"([consumers.billing]
endpoint = "127.0.0.1:7501"

[consumers.audit]
endpoint = "127.0.0.1:7502"
)";

}  // namespace

BOOST_AUTO_TEST_SUITE(valid)

BOOST_AUTO_TEST_CASE(the_design_example) {
  const auto result = load(R"(
[consumers.billing]
endpoint = "127.0.0.1:7501"  # the gateway dials it
queue_capacity = 10000       # frames
queue_bytes = 67108864       # optional cap in bytes
overflow = "drop-oldest"

[consumers.audit]
endpoint = "127.0.0.1:7502"

[[routes]]
match = "orders.*.created"
to = ["billing", "audit"]

[[routes]]
match = "audit.>"
to = ["audit"]

[dead_letter]
consumer = "audit"           # optional: where unroutable frames go
)");
  BOOST_TEST(result.errors.empty());
  BOOST_REQUIRE(result.config.has_value());
  const auto& c = *result.config;
  BOOST_REQUIRE(c.consumers.size() == 2u);
  BOOST_TEST(c.consumers[0].name == "billing");
  BOOST_TEST(c.consumers[0].address.to_string() == "127.0.0.1:7501");
  BOOST_TEST(c.consumers[0].queue_capacity == 10000u);
  BOOST_TEST(c.consumers[0].queue_bytes == 67108864u);
  BOOST_TEST(to_string(c.consumers[0].overflow) == "drop-oldest");
  BOOST_TEST(c.consumers[1].name == "audit");
  BOOST_REQUIRE(c.routes.size() == 2u);
  BOOST_TEST(c.routes[0].match == "orders.*.created");
  BOOST_TEST(c.routes[0].to == (std::vector<std::string>{"billing", "audit"}),
             boost::test_tools::per_element());
  BOOST_TEST(c.routes[1].match == "audit.>");
  BOOST_TEST(c.dead_letter.value() == "audit");
}

BOOST_AUTO_TEST_CASE(defaults) {
  const auto result = load("[consumers.x]\nendpoint = \"[::1]:9\"\n");
  BOOST_REQUIRE(result.config.has_value());
  const auto& x = result.config->consumers.at(0);
  BOOST_TEST(x.address.host == "::1");
  BOOST_TEST(x.queue_capacity == 10000u);
  BOOST_TEST(x.queue_bytes == 0u);
  BOOST_TEST(to_string(x.overflow) == "drop-oldest");
  BOOST_TEST(!x.ack);
  BOOST_TEST(x.max_unacked_bytes == gatewayd::consumers::consumer_spec::default_max_unacked_bytes);
  BOOST_TEST(result.config->routes.empty());
  BOOST_TEST(!result.config->dead_letter.has_value());
}

BOOST_AUTO_TEST_CASE(consumers_keep_file_order) {
  // toml++ sorts keys; the loader must not.
  const auto result = load(R"([consumers.zulu]
endpoint = "127.0.0.1:1"
[consumers.alpha]
endpoint = "127.0.0.1:2"
[consumers.mike]
endpoint = "127.0.0.1:3"
)");
  BOOST_REQUIRE(result.config.has_value());
  const auto& cs = result.config->consumers;
  BOOST_REQUIRE(cs.size() == 3u);
  BOOST_TEST(cs[0].name == "zulu");
  BOOST_TEST(cs[1].name == "alpha");
  BOOST_TEST(cs[2].name == "mike");
}

BOOST_AUTO_TEST_CASE(ack_consumers) {
  const auto result = load(R"([consumers.a]
endpoint = "127.0.0.1:1"
ack = true
max_unacked_bytes = 65536
[consumers.b]
endpoint = "127.0.0.1:2"
ack = true
[consumers.c]
endpoint = "127.0.0.1:3"
ack = false
)");
  BOOST_REQUIRE(result.config.has_value());
  const auto& cs = result.config->consumers;
  BOOST_TEST(cs[0].ack);
  BOOST_TEST(cs[0].max_unacked_bytes == 65536u);
  BOOST_TEST(cs[1].ack);
  BOOST_TEST(cs[1].max_unacked_bytes == 8u << 20);
  BOOST_TEST(!cs[2].ack);
}

BOOST_AUTO_TEST_CASE(every_overflow_policy) {
  for (const char* policy : {"drop-oldest", "drop-newest", "disconnect", "backpressure"}) {
    const auto result = load(
        std::string{"[consumers.x]\nendpoint = \"127.0.0.1:1\"\noverflow = \""} + policy + "\"\n");
    BOOST_REQUIRE(result.config.has_value());
    BOOST_TEST(to_string(result.config->consumers[0].overflow) == policy);
    BOOST_TEST(gatewayd::consumers::overflow_policy_names.parse(policy).has_value());
  }
}

BOOST_AUTO_TEST_CASE(inline_tables_work_too) {
  const auto result = load(R"(consumers = { a = { endpoint = "127.0.0.1:1" } }
routes = [ { match = "x.>", to = ["a"] } ]
dead_letter = { consumer = "a" }
)");
  BOOST_TEST(result.errors.empty());
  BOOST_REQUIRE(result.config.has_value());
  BOOST_TEST(result.config->routes.at(0).match == "x.>");
}

BOOST_AUTO_TEST_CASE(the_real_sample_file) {
  const auto result = load_routes_file(GATEWAYD_SOURCE_DIR "/etc/routes.toml");
  for (const auto& e : result.errors)
    BOOST_TEST_MESSAGE(e.to_string());
  BOOST_TEST(result.errors.empty());
  BOOST_REQUIRE(result.config.has_value());
  BOOST_TEST(result.config->consumers.size() == 2u);
  BOOST_TEST(result.config->routes.size() == 2u);
  BOOST_TEST(result.config->dead_letter.value() == "audit");
  const auto table = gatewayd::routing::routing_table::build(result.config->rules());
  gatewayd::routing::lookup_scratch scratch;
  const auto r = table->lookup("orders.eu.created", scratch);
  BOOST_TEST(r.consumers.size() == 2u);
}

BOOST_AUTO_TEST_CASE(group_of_endpoints) {
  const auto result = load(R"([consumers.billing]
endpoints = ["127.0.0.1:7501", "127.0.0.1:7502", "[::1]:7503"]
balance = "least-queued"
ack = true

[consumers.audit]
endpoints = ["127.0.0.1:7601"]
)");
  for (const auto& e : result.errors)
    BOOST_TEST_MESSAGE(e.to_string());
  BOOST_REQUIRE(result.config.has_value());
  const auto& b = result.config->consumers.at(0);
  BOOST_TEST(b.endpoints.size() == 3u);
  BOOST_TEST(b.endpoints[2].host == "::1");
  BOOST_TEST((b.address == b.endpoints[0]));
  BOOST_TEST(to_string(b.balance) == "least-queued");
  BOOST_TEST(b.ack);
  // round-robin is the default balance
  BOOST_TEST(to_string(result.config->consumers.at(1).balance) == "round-robin");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(errors)

BOOST_AUTO_TEST_CASE(syntax_error_is_the_only_error) {
  expect_error("[consumers.a]\nendpoint = \n", 2, 12,
               "Error while parsing key-value pair: expected value, saw '\\n'");
}

BOOST_AUTO_TEST_CASE(duplicate_consumer_is_a_toml_error) {
  const auto result =
      load(two_consumers + "\n[consumers.billing]\nendpoint = \"127.0.0.1:7509\"\n");
  BOOST_TEST(!result.config.has_value());
  BOOST_REQUIRE(result.errors.size() == 1u);
  BOOST_TEST(result.errors[0].line == 7u);
  BOOST_TEST(result.errors[0].column == 1u);
  BOOST_TEST(result.errors[0].message.find("consumers.billing") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(unknown_keys_at_every_level) {
  expect_errors(
      R"(colour = "red"
[consumers.a]
endpoint = "127.0.0.1:1"
  queue_size = 5
[[routes]]
match = "x"
to = ["a"]
  priority = 1
[dead_letter]
consumer = "a"
 also = "b"
)",
      {{1, 1,
        "colour: unknown key (expected consumers, routes, dead_letter, suppliers, "
        "suppliers_default)"},
       {4, 3,
        "consumers.a.queue_size: unknown key (expected endpoint, endpoints, balance, "
        "queue_capacity, queue_bytes, overflow, tls, ack, spool_max_bytes, max_unacked_bytes)"},
       {8, 3, "routes[0].priority: unknown key (expected match, to)"},
       {11, 2, "dead_letter.also: unknown key (expected consumer)"}});
}

BOOST_AUTO_TEST_CASE(wrong_types) {
  expect_errors(
      R"(routes = "all"
dead_letter = 5
[consumers.a]
endpoint = 7501
queue_capacity = "many"
queue_bytes = 1.5
overflow = true
)",
      {{1, 10, "routes: expected an array, got a string"},
       {2, 15, "dead_letter: expected a table, got an integer"},
       {4, 12, "consumers.a.endpoint: expected a string, got an integer"},
       {5, 18, "consumers.a.queue_capacity: expected an integer, got a string"},
       {6, 15, "consumers.a.queue_bytes: expected an integer, got a floating-point number"},
       {7, 12, "consumers.a.overflow: expected a string, got a boolean"}});
  expect_error("consumers = 3\n", 1, 13, "consumers: expected a table, got an integer");
  expect_error("[consumers]\na = \"127.0.0.1:1\"\n", 2, 5,
               "consumers.a: expected a table ([consumers.a] with an endpoint), got a string");
  expect_error("routes = [1]\n", 1, 11,
               "routes[0]: expected a table ([[routes]] with match and to), got an integer");
}

BOOST_AUTO_TEST_CASE(route_problems) {
  expect_errors(two_consumers + R"(
[[routes]]
match = "orders.>.created"
to = ["biling", "audit", 3, "audit"]

[[routes]]
match = 42
to = []

[[routes]]
to = "audit"
)",
                {{8, 9,
                  "routes[0].match: invalid pattern \"orders.>.created\": '>' is only allowed as "
                  "the last token at character 8"},
                 {9, 7, "routes[0].to[0]: unknown consumer \"biling\" (did you mean \"billing\"?)"},
                 {9, 26, "routes[0].to[2]: expected a consumer name (a string), got an integer"},
                 {9, 29, "routes[0].to[3]: consumer \"audit\" is listed twice"},
                 {12, 9, "routes[1].match: expected a string, got an integer"},
                 {13, 6, "routes[1].to: must name at least one consumer"},
                 {15, 1, "routes[2]: missing required key \"match\""},
                 {16, 6, "routes[2].to: expected an array, got a string"}});
}

// The "did you mean" search compares every unknown name with every known one: with 10,000
// consumers of long names and a few hundred mistyped routes it must stay a fraction of a
// second (an edit distance is quadratic in the name's length), not minutes. It is bounded by
// work, not by time: the first mistakes get their suggestion, and once the file's budget is
// spent the rest come without one.
namespace {

constexpr int many_consumers = 10000, many_typos = 300;

std::string long_name(int i) {
  std::string n = "consumer-" + std::to_string(i) + "-";
  n.resize(128, 'x');
  return n;
}

std::string long_names_with_typos() {
  std::string text;
  for (int i = 0; i < many_consumers; ++i)
    text += "[consumers." + long_name(i) + "]\nendpoint = \"127.0.0.1:7501\"\n";
  for (int i = 0; i < many_typos; ++i) {
    std::string typo = long_name(i * 7);
    typo.back() = 'y';  // one edit away from a real name, and as long as every other
    text += "[[routes]]\nmatch = \"a\"\nto = [\"" + typo + "\"]\n";
  }
  return text;
}

}  // namespace

// Each of the 300 mistakes is one edit from a real name among 10,000 of 128 characters: each
// gets that name as its suggestion.
BOOST_AUTO_TEST_CASE(each_mistyped_long_name_gets_the_right_suggestion) {
  const auto result = load(long_names_with_typos());
  BOOST_REQUIRE(result.errors.size() == std::size_t{many_typos});
  for (int i = 0; i < many_typos; ++i)
    BOOST_TEST(result.errors[std::size_t(i)].message.find("(did you mean \"" + long_name(i * 7) +
                                                          "\"?)") != std::string::npos,
               result.errors[std::size_t(i)].message);
}

// The search is bounded by work, not by time: names three edits from a real one (no
// suggestion, but each compared along its whole length with every name a digit or two away)
// spend the file's budget, and a mistake one edit away that comes after them gets none.
BOOST_AUTO_TEST_CASE(suggestions_stop_when_the_search_budget_is_spent) {
  std::string text;
  for (int i = 0; i < many_consumers; ++i)
    text += "[consumers." + long_name(i) + "]\nendpoint = \"127.0.0.1:7501\"\n";
  const auto route_to = [&](const std::string& to) {
    text += "[[routes]]\nmatch = \"a\"\nto = [\"" + to + "\"]\n";
  };
  const auto one_edit = [](int i) {
    std::string n = long_name(i);
    n.back() = 'y';
    return n;
  };
  constexpr int far = 400;
  route_to(one_edit(1234));
  for (int i = 0; i < far; ++i) {
    std::string n = long_name(1000 + i * 17);
    n.replace(n.size() - 3, 3, "yyy");
    route_to(n);
  }
  route_to(one_edit(4321));
  const auto result = load(text);
  BOOST_REQUIRE(result.errors.size() == std::size_t{far + 2});
  const auto suggestion = [&](int i) { return "(did you mean \"" + long_name(i) + "\"?)"; };
  BOOST_TEST(result.errors.front().message.find(suggestion(1234)) != std::string::npos,
             result.errors.front().message);
  BOOST_TEST(result.errors.back().message.find("did you mean") == std::string::npos,
             result.errors.back().message);
}

// The same file, timed (release only): the bounded search costs a fraction of a second.
BOOST_AUTO_TEST_CASE(suggestions_stay_cheap_with_ten_thousand_long_consumer_names,
                     *boost::unit_test::label("perf")) {
  const auto text = long_names_with_typos();
  const auto start = std::chrono::steady_clock::now();
  const auto result = load(text);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  BOOST_TEST_MESSAGE("loading " << many_consumers << " consumers and " << many_typos
                                << " typos took " << seconds << " s");
  BOOST_TEST(result.errors.size() == std::size_t{many_typos});
  BOOST_TEST(seconds < 3.0);
}

BOOST_AUTO_TEST_CASE(missing_to_and_unknown_consumer_without_suggestion) {
  expect_errors(
      two_consumers + "[[routes]]\nmatch = \"a\"\n[[routes]]\nmatch = \"b\"\nto = [\"zzzzzz\"]\n",
      {{6, 1, "routes[0]: missing required key \"to\""},
       {10, 7, "routes[1].to[0]: unknown consumer \"zzzzzz\""}});
}

BOOST_AUTO_TEST_CASE(consumer_problems) {
  expect_errors(
      R"([consumers."bad name"]
endpoint = "127.0.0.1:1"

[consumers.host]
endpoint = "localhost:7501"

[consumers.port0]
endpoint = "127.0.0.1:0"

[consumers.zero]
endpoint = "127.0.0.1:1"
queue_capacity = 0
queue_bytes = 0

[consumers.negative]
endpoint = "127.0.0.1:1"
queue_capacity = -1
queue_bytes = -1

[consumers.huge]
endpoint = "127.0.0.1:1"
queue_capacity = 4294967296

[consumers.policy]
endpoint = "127.0.0.1:1"
overflow = "drop-old"

[consumers.missing]
queue_capacity = 5
)",
      {{1, 12,
        "consumers.\"bad name\": consumer name \"bad name\" must be made of A-Z a-z 0-9 _ "
        "- (it becomes a metric label)"},
       {5, 12,
        "consumers.host.endpoint: \"localhost:7501\" is not a literal IPv4:port or "
        "[IPv6]:port address"},
       {8, 12, "consumers.port0.endpoint: port 0 cannot be dialled"},
       {12, 18, "consumers.zero.queue_capacity: 0 is out of range (1..4294967295)"},
       {13, 15, "consumers.zero.queue_bytes: 0 is out of range (1..9223372036854775807)"},
       {17, 18, "consumers.negative.queue_capacity: -1 is out of range (1..4294967295)"},
       {18, 15, "consumers.negative.queue_bytes: -1 is out of range (1..9223372036854775807)"},
       {22, 18, "consumers.huge.queue_capacity: 4294967296 is out of range (1..4294967295)"},
       {26, 12,
        "consumers.policy.overflow: unknown policy \"drop-old\" (expected drop-oldest, "
        "drop-newest, disconnect or backpressure)"},
       {28, 1, "consumers.missing: missing required key \"endpoint\""}});
}

BOOST_AUTO_TEST_CASE(ack_problems) {
  expect_errors(
      R"([consumers.a]
endpoint = "127.0.0.1:1"
ack = "yes"

[consumers.b]
endpoint = "127.0.0.1:1"
ack = true
max_unacked_bytes = 0

[consumers.c]
endpoint = "127.0.0.1:1"
max_unacked_bytes = 1024
)",
      {{3, 7, "consumers.a.ack: expected a boolean (true or false), got a string"},
       {8, 21, "consumers.b.max_unacked_bytes: 0 is out of range (1..9223372036854775807)"},
       {12, 21, "consumers.c.max_unacked_bytes: only means something with ack = true"}});
}

// Issue 46: a group cannot have a spool yet; one consumer can.
BOOST_AUTO_TEST_CASE(a_spool_on_a_group_is_refused_at_its_key) {
  expect_errors(
      R"([consumers.a]
endpoints = ["127.0.0.1:1", "127.0.0.1:2"]
spool_max_bytes = 1048576

[consumers.b]
endpoint = "127.0.0.1:1"
spool_max_bytes = 1048576
)",
      {{3, 19,
        "consumers.a.spool_max_bytes: a group (endpoints = [...]) cannot have a spool yet; give "
        "the spool to a consumer with one endpoint"}});
}

BOOST_AUTO_TEST_CASE(a_faulty_consumer_is_still_known_to_routes) {
  // Only the endpoint is wrong; the route naming the consumer must not add a second error.
  expect_error("[consumers.a]\nendpoint = \"nowhere\"\n[[routes]]\nmatch = \"x\"\nto = [\"a\"]\n",
               2, 12,
               "consumers.a.endpoint: \"nowhere\" is not a literal IPv4:port or [IPv6]:port "
               "address");
}

BOOST_AUTO_TEST_CASE(dead_letter_problems) {
  expect_error(two_consumers + "[dead_letter]\nconsumer = \"audi\"\n", 7, 12,
               "dead_letter.consumer: unknown consumer \"audi\" (did you mean \"audit\"?)");
  expect_error(two_consumers + "[dead_letter]\n", 6, 1,
               "dead_letter: missing required key \"consumer\"");
}

BOOST_AUTO_TEST_CASE(several_errors_in_file_order) {
  const auto result = load(R"([[routes]]
match = "a..b"
to = ["ghost"]

[consumers.a]
endpoint = "1.2.3.4"
)");
  BOOST_TEST(!result.config.has_value());
  BOOST_REQUIRE(result.errors.size() == 3u);
  BOOST_TEST(result.errors[0].to_string() ==
             "routes.toml:2:9: routes[0].match: invalid pattern \"a..b\": pattern has an empty "
             "token at character 3 (leading, trailing or doubled '.')");
  BOOST_TEST(result.errors[1].to_string() ==
             "routes.toml:3:7: routes[0].to[0]: unknown consumer \"ghost\"");
  BOOST_TEST(result.errors[2].line == 6u);
}

BOOST_AUTO_TEST_CASE(error_format) {
  BOOST_TEST((config_error{"f.toml", 3, 7, "bad"}.to_string()) == "f.toml:3:7: bad");
  BOOST_TEST((config_error{"f.toml", 3, 0, "bad"}.to_string()) == "f.toml:3: bad");
  BOOST_TEST((config_error{"f.toml", 0, 0, "bad"}.to_string()) == "f.toml: bad");
}

BOOST_AUTO_TEST_CASE(group_errors_have_positions) {
  expect_errors(
      R"([consumers.a]
endpoint = "127.0.0.1:1"
endpoints = ["127.0.0.1:2"]
[consumers.b]
endpoints = ["127.0.0.1:3", "nowhere", "127.0.0.1:3", 7]
balance = "random"
[consumers.c]
endpoint = "127.0.0.1:4"
balance = "address"
[consumers.d]
endpoints = []
)",
      {{3, 13,
        "consumers.a.endpoints: a consumer has either endpoint (one) or endpoints (a "
        "group), not both"},
       {5, 29,
        "consumers.b.endpoints[1]: \"nowhere\" is not a literal IPv4:port or "
        "[IPv6]:port address"},
       {5, 40, "consumers.b.endpoints[2]: \"127.0.0.1:3\" is listed twice"},
       {5, 55, "consumers.b.endpoints[3]: expected an endpoint (a string), got an integer"},
       {6, 11,
        "consumers.b.balance: unknown balance \"random\" (expected round-robin, "
        "least-queued or address)"},
       {9, 11, "consumers.c.balance: only means something with endpoints = [...] (a group)"},
       {11, 13, "consumers.d.endpoints: must name at least one endpoint"}});
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(consumer_names) {
  BOOST_TEST(valid_consumer_name("billing-2_eu"));
  BOOST_TEST(!valid_consumer_name(""));
  BOOST_TEST(!valid_consumer_name("a.b"));
  BOOST_TEST(!valid_consumer_name("a b"));
}
