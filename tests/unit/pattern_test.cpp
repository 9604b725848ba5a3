#include <boost/test/unit_test.hpp>

#include <string>

#include "routing/pattern.hpp"

using namespace gatewayd::routing;

BOOST_AUTO_TEST_SUITE(validation)

BOOST_AUTO_TEST_CASE(accepts_literals_and_wildcards) {
  for (const char* p : {"a", "orders", "orders.eu.created", "A-b_9.x", "*", ">", "*.*", "orders.*",
                        "orders.>", "*.>", "a.*.>", "a.*.c.*.e", "-._._-"}) {
    BOOST_TEST_INFO("pattern " << p);
    BOOST_TEST(!pattern_error(p).has_value());
  }
}

BOOST_AUTO_TEST_CASE(refuses_empty_and_empty_tokens) {
  BOOST_TEST(pattern_error("").value() == "pattern is empty");
  for (const char* p : {".", "a.", ".a", "a..b", "a.*.", ".."}) {
    BOOST_TEST_INFO("pattern " << p);
    const auto why = pattern_error(p);
    BOOST_REQUIRE(why.has_value());
    BOOST_TEST(why->find("empty token") != std::string::npos);
  }
  BOOST_TEST(pattern_error("a..b").value().find("at character 3") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(tail_wildcard_only_last) {
  for (const char* p : {">.a", "a.>.b", ">.>", "a.>.*"}) {
    BOOST_TEST_INFO("pattern " << p);
    const auto why = pattern_error(p);
    BOOST_REQUIRE(why.has_value());
    BOOST_TEST(why->find("only allowed as the last token") != std::string::npos);
  }
  BOOST_TEST(pattern_error("a.>.b").value() ==
             "'>' is only allowed as the last token at character 3");
}

BOOST_AUTO_TEST_CASE(wildcards_are_whole_tokens) {
  BOOST_TEST(pattern_error("a*").value() == "wildcard '*' must be a whole token at character 2");
  BOOST_TEST(pattern_error("orders.eu>").value() ==
             "wildcard '>' must be a whole token at character 10");
  BOOST_TEST(pattern_error("**").has_value());
  BOOST_TEST(pattern_error(">>").has_value());
}

BOOST_AUTO_TEST_CASE(refuses_characters_outside_the_alphabet) {
  BOOST_TEST(pattern_error("a b").value() ==
             "pattern has character 0x20 at character 2; tokens are made of A-Z a-z 0-9 _ -");
  BOOST_TEST(pattern_error("a/b").value().find("'/'") != std::string::npos);
  BOOST_TEST(pattern_error(std::string("a\0b", 3)).value().find("0x00") != std::string::npos);
  BOOST_TEST(pattern_error("caf\xc3\xa9").has_value());
}

BOOST_AUTO_TEST_CASE(refuses_patterns_longer_than_any_address) {
  std::string p(255, 'a');
  BOOST_TEST(!pattern_error(p).has_value());
  p += 'a';
  BOOST_TEST(pattern_error(p).value().find("256 characters") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(matching)

BOOST_AUTO_TEST_CASE(literal_patterns_match_themselves_only) {
  BOOST_TEST(pattern_matches("orders.eu.created", "orders.eu.created"));
  BOOST_TEST(!pattern_matches("orders.eu.created", "orders.eu"));
  BOOST_TEST(!pattern_matches("orders.eu", "orders.eu.created"));
  BOOST_TEST(!pattern_matches("orders.eu", "orders.EU"));
  BOOST_TEST(!pattern_matches("orders", "order"));
}

BOOST_AUTO_TEST_CASE(star_matches_exactly_one_token) {
  BOOST_TEST(pattern_matches("orders.*.created", "orders.eu.created"));
  BOOST_TEST(!pattern_matches("orders.*.created", "orders.created"));       // zero tokens
  BOOST_TEST(!pattern_matches("orders.*.created", "orders.eu.x.created"));  // two tokens
  BOOST_TEST(pattern_matches("*", "a"));
  BOOST_TEST(!pattern_matches("*", "a.b"));
  BOOST_TEST(pattern_matches("*.*", "a.b"));
  BOOST_TEST(!pattern_matches("orders.*", "orders"));
}

BOOST_AUTO_TEST_CASE(tail_matches_one_or_more_tokens) {
  BOOST_TEST(pattern_matches("orders.>", "orders.eu"));
  BOOST_TEST(pattern_matches("orders.>", "orders.eu.created"));
  BOOST_TEST(!pattern_matches("orders.>", "orders"));
  BOOST_TEST(!pattern_matches("orders.>", "audit.x"));
  BOOST_TEST(pattern_matches(">", "a"));
  BOOST_TEST(pattern_matches(">", "a.b.c"));
}

BOOST_AUTO_TEST_CASE(star_then_tail) {
  BOOST_TEST(!pattern_matches("a.*.>", "a"));
  BOOST_TEST(!pattern_matches("a.*.>", "a.b"));
  BOOST_TEST(pattern_matches("a.*.>", "a.b.c"));
  BOOST_TEST(pattern_matches("a.*.>", "a.b.c.d"));
  BOOST_TEST(!pattern_matches("a.*.>", "x.b.c"));
}

BOOST_AUTO_TEST_CASE(split_tokens_keeps_views) {
  const std::string text = "a.bc.d";
  const auto tokens = split_tokens(text);
  BOOST_REQUIRE(tokens.size() == 3u);
  BOOST_TEST(tokens[1] == "bc");
  BOOST_TEST(tokens[1].data() == text.data() + 2);
}

BOOST_AUTO_TEST_SUITE_END()
