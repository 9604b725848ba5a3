// The stop deadline's own thread: it forces a stop that did not end in time, gives the pool a
// moment to leave, then abandons it; a stop that ends first hears nothing from it.
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "gateway/stop_deadline.hpp"
#include "tests/support/wait_until.hpp"

using gatewayd::gateway::stop_deadline;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

bool becomes_true(const std::atomic<bool>& flag, std::chrono::milliseconds timeout) {
  return gatewayd::test::wait_until([&] { return flag.load(); }, timeout);
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_stop_that_ends_in_time_is_never_forced) {
  std::atomic<bool> forced{false}, abandoned{false};
  {
    stop_deadline d;
    d.arm(clock_type::now() + 200ms, 50ms, {[&] { forced = true; }, [&] { abandoned = true; }});
    d.ended();
  }  // joined: its thread is done
  BOOST_TEST(!forced.load());
  BOOST_TEST(!abandoned.load());
}

// The pool leaves once forced (its threads were only waiting): nothing is abandoned.
BOOST_AUTO_TEST_CASE(a_late_stop_is_forced_at_the_deadline_and_not_abandoned_once_over) {
  std::atomic<bool> forced{false}, abandoned{false};
  const auto armed = clock_type::now();
  clock_type::time_point forced_at{};
  {
    stop_deadline d;
    d.arm(armed + 100ms, 5s,
          {[&] {
             forced_at = clock_type::now();
             forced = true;
             d.ended();  // as the pool's threads leaving would
           },
           [&] { abandoned = true; }});
    BOOST_TEST_REQUIRE(becomes_true(forced, 5s));
  }                                          // joined long before the 5 s grace: the stop was over
  BOOST_TEST((forced_at - armed >= 100ms));  // not before its time
  BOOST_TEST(!abandoned.load());
}

// A pool thread that never returns: after the grace the process is given up on.
BOOST_AUTO_TEST_CASE(a_pool_that_does_not_leave_is_abandoned_after_the_grace) {
  std::atomic<bool> forced{false}, abandoned{false};
  stop_deadline d;
  d.arm(clock_type::now() + 50ms, 100ms, {[&] { forced = true; }, [&] { abandoned = true; }});
  BOOST_TEST_REQUIRE(becomes_true(abandoned, 5s));
  BOOST_TEST(forced.load());
}

BOOST_AUTO_TEST_CASE(only_the_first_arm_counts) {
  std::atomic<int> forced{0};
  stop_deadline d;
  d.arm(clock_type::now() + 50ms, 10ms, {[&] { ++forced; }, [] {}});
  d.arm(clock_type::now(), 10ms, {[&] { forced += 10; }, [] {}});
  BOOST_TEST_REQUIRE(gatewayd::test::wait_until([&] { return forced.load() != 0; }, 5s));
  d.ended();
  BOOST_TEST(forced.load() == 1);
}
