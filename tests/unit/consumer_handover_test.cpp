// A group member that is already closed when another member hands it frames: they go on to a
// member that is up, or are counted as its end says, and never wait in its queue.

#include <boost/test/unit_test.hpp>

#include "consumers/consumer_group.hpp"
#include "tests/support/consumer_harness.hpp"

using namespace gatewayd::test;

namespace {

// Members `a` (closed as a reload removes it) and `b` (up, or closed too), in one group.
struct closed_member : io_fixture {
  peer pa;
  peer pb;
  std::shared_ptr<gc::consumer> a =
      make(spec(pa.address(), 1000, gc::overflow_policy::drop_oldest));
  std::shared_ptr<gc::consumer> b =
      make(spec(pb.address(), 1000, gc::overflow_policy::drop_oldest));
  std::shared_ptr<gc::consumer_group> group =
      std::make_shared<gc::consumer_group>("g", gc::balance_policy::round_robin, std::vector{a, b});
  frame_source src{0};

  closed_member() {
    group->adopt();
    BOOST_REQUIRE(pa.accept(2s));
    BOOST_REQUIRE(close_consumer(*a, 1s, gc::drop_reason::removed) == 0u);
  }
  ~closed_member() {
    if (!b_closed) close_consumer(*b, 1s);
  }
  bool b_closed = false;

  std::uint64_t removed(const gc::consumer& c) const {
    return c.stats().dropped[static_cast<std::size_t>(gc::drop_reason::removed)].load();
  }
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(frames_handed_to_a_closed_member_go_on_to_one_that_is_up, closed_member) {
  auto rb = pb.accept(2s);
  BOOST_REQUIRE(rb);
  BOOST_REQUIRE(wait_until([&] { return b->stats().connected.load(); }, 2s));
  for (const auto& g : src.make(20))
    a->take_over(g);
  BOOST_TEST(rb->wait_frames(20, 5s), "b received " << rb->frames().size() << " of 20");
  BOOST_TEST(a->stats().queued_frames.load() == 0u);
  BOOST_TEST(removed(*a) == 0u);
}

BOOST_FIXTURE_TEST_CASE(with_no_member_up_they_are_counted_as_its_end_says, closed_member) {
  BOOST_REQUIRE(close_consumer(*b, 1s) == 0u);
  b_closed = true;
  for (const auto& g : src.make(20))
    a->take_over(g);
  // At once, not when the member is destroyed: nothing of them stays queued on it.
  BOOST_TEST(a->stats().queued_frames.load() == 0u);
  BOOST_TEST(removed(*a) == 20u);
}
