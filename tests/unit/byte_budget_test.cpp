// runtime::byte_budget: a take that does not fit changes nothing, one that fits is never
// refused by the exact take, and threads taking and giving back at once leave used() exact.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <latch>
#include <thread>

#include "runtime/byte_budget.hpp"

using gatewayd::runtime::byte_budget;

BOOST_AUTO_TEST_CASE(a_take_past_the_limit_is_refused_and_changes_nothing) {
  byte_budget b(100);
  BOOST_TEST(b.try_take(60));
  BOOST_TEST(!b.try_take(41));
  BOOST_TEST(b.used() == 60u);
  BOOST_TEST(!b.try_take_optimistic(41));
  BOOST_TEST(b.used() == 60u);
  BOOST_TEST(b.try_take(40));  // exactly to the limit
  BOOST_TEST(!b.try_take(1));
  BOOST_TEST(!b.try_take_optimistic(1));
  BOOST_TEST(b.used() == 100u);
  b.give_back(100);
  BOOST_TEST(b.used() == 0u);
  BOOST_TEST(b.limit() == 100u);
}

// The holders that never drop go past the limit; the tries then refuse until it is given back.
BOOST_AUTO_TEST_CASE(take_goes_past_the_limit_and_the_tries_wait_for_the_rest) {
  byte_budget b(100);
  b.take(150);
  BOOST_TEST(b.used() == 150u);
  BOOST_TEST(!b.try_take(1));
  BOOST_TEST(!b.try_take_optimistic(1));
  BOOST_TEST(b.used() == 150u);
  b.give_back(100);
  BOOST_TEST(b.try_take(50));
  b.give_back(100);
  BOOST_TEST(b.used() == 0u);
}

BOOST_AUTO_TEST_CASE(no_limit_takes_everything_and_a_limit_set_later_holds) {
  byte_budget b;
  BOOST_TEST(b.limit() == 0u);
  BOOST_TEST(b.try_take(std::uint64_t{1} << 62));
  BOOST_TEST(b.try_take_optimistic(std::uint64_t{1} << 61));
  b.give_back((std::uint64_t{1} << 62) + (std::uint64_t{1} << 61));
  b.set_limit(10);
  BOOST_TEST(!b.try_take(11));
  BOOST_TEST(b.try_take(10));
  BOOST_TEST(b.used() == 10u);
}

namespace {

struct race_result {
  std::array<int, 2> refused{};  // tries refused, by thread
  std::uint64_t most_seen = 0;   // the highest used() a thread saw right after its try took
};

// Two threads, started together, each `rounds` times: a try of `bytes` (the exact or the
// optimistic one), what it took given back, and, with `keep`, one byte taken and kept.
template <bool exact>
race_result race(byte_budget& b, std::uint64_t bytes, int rounds, bool keep) {
  race_result r;
  std::array<std::uint64_t, 2> seen{};
  std::latch go(2);
  auto work = [&](int me) {
    go.arrive_and_wait();
    for (int i = 0; i < rounds; ++i) {
      if (exact ? b.try_take(bytes) : b.try_take_optimistic(bytes)) {
        seen[me] = std::max(seen[me], b.used());
        b.give_back(bytes);
      } else {
        ++r.refused[me];
      }
      if (keep) b.take(1);
    }
  };
  std::thread other(work, 1);
  work(0);
  other.join();
  r.most_seen = std::max(seen[0], seen[1]);
  return r;
}

}  // namespace

// With room for both threads' takes at once (and the bytes they keep), the exact take is never
// refused; and every byte taken and given back is counted once, none lost to a race.
BOOST_AUTO_TEST_CASE(two_threads_taking_and_giving_back_keep_used_exact) {
  constexpr int rounds = 200000;
  byte_budget exact(2 * 1000 + 2 * rounds);
  const auto r = race<true>(exact, 1000, rounds, true);
  BOOST_TEST(r.refused[0] == 0);
  BOOST_TEST(r.refused[1] == 0);
  BOOST_TEST(exact.used() == 2u * rounds);  // the bytes kept, nothing else

  byte_budget unlimited;
  race<false>(unlimited, 1000, rounds, true);
  BOOST_TEST(unlimited.used() == 2u * rounds);
}

// Room for one take at a time, not two: the threads refuse each other, the exact take never
// lets used() past the limit, and no refusal leaves a byte behind.
BOOST_AUTO_TEST_CASE(refused_tries_under_contention_leave_used_exact) {
  constexpr int rounds = 200000;
  byte_budget exact(1500);
  const auto r = race<true>(exact, 1000, rounds, false);
  BOOST_TEST(r.most_seen <= 1500u);
  BOOST_TEST(exact.used() == 0u);
  BOOST_TEST(r.refused[0] + r.refused[1] < 2 * rounds);  // it was not simply full

  byte_budget optimistic(1500);
  race<false>(optimistic, 1000, rounds, false);
  BOOST_TEST(optimistic.used() == 0u);
}
