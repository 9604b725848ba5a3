#include <boost/test/unit_test.hpp>

#include <chrono>
#include <vector>

#include "consumers/backoff.hpp"

using gatewayd::consumers::backoff;
using namespace std::chrono_literals;

namespace {
backoff::random_source constant(double r) {
  return [r] { return r; };
}
}  // namespace

BOOST_AUTO_TEST_CASE(ceiling_doubles_up_to_the_cap) {
  backoff b(100ms, 30s, constant(0.999999));
  std::vector<std::chrono::milliseconds> ceilings;
  for (int i = 0; i < 12; ++i) {
    ceilings.push_back(b.ceiling());
    b.next();
  }
  const std::vector<std::chrono::milliseconds> expected{
      100ms, 200ms, 400ms, 800ms, 1600ms, 3200ms, 6400ms, 12800ms, 25600ms, 30s, 30s, 30s};
  BOOST_TEST(ceilings == expected, boost::test_tools::per_element());
  BOOST_TEST(b.attempts() == 12u);
}

BOOST_AUTO_TEST_CASE(equal_jitter_keeps_half_of_every_delay) {
  backoff low(100ms, 30s, constant(0.0));
  BOOST_TEST(low.next().count() == 50);
  BOOST_TEST(low.next().count() == 100);
  BOOST_TEST(low.next().count() == 200);

  backoff high(100ms, 1s, constant(1.0));  // out-of-range sources are clamped
  BOOST_TEST(high.next().count() == 100);
  BOOST_TEST(high.next().count() == 200);

  backoff mid(100ms, 1s, constant(0.5));
  BOOST_TEST(mid.next().count() == 75);
}

BOOST_AUTO_TEST_CASE(default_jitter_stays_within_bounds) {
  backoff b(100ms, 3s);
  for (int i = 0; i < 2000; ++i) {
    if (i % 10 == 0) b.reset();
    const auto ceiling = b.ceiling();
    const auto d = b.next();
    BOOST_TEST(d >= ceiling / 2);
    BOOST_TEST(d <= ceiling);
  }
}

BOOST_AUTO_TEST_CASE(reset_starts_over) {
  backoff b(100ms, 30s, constant(0.0));
  for (int i = 0; i < 5; ++i)
    b.next();
  BOOST_TEST(b.ceiling().count() == 3200);
  b.reset();
  BOOST_TEST(b.ceiling().count() == 100);
  BOOST_TEST(b.attempts() == 0u);
  BOOST_TEST(b.next().count() == 50);
}

BOOST_AUTO_TEST_CASE(degenerate_limits_are_sane) {
  backoff b(0ms, 0ms, constant(0.0));  // at least 1 ms, never a busy loop of zero waits
  BOOST_TEST(b.ceiling().count() == 1);
  BOOST_TEST(b.next().count() == 1);
  backoff c(500ms, 100ms, constant(1.0));  // a max below initial means "never grow"
  BOOST_TEST(c.next().count() == 500);
  BOOST_TEST(c.next().count() == 500);
}
