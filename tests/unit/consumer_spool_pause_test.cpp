// A spooled consumer's suppliers pause only for its disk (behind, or full under backpressure),
// and every such pause ends: against a real spool thread, real files and a loopback endpoint.
// The spool thread is held up by a job of a second spool, so "behind" is a state the test makes,
// not a race it hopes for.
#include <boost/test/unit_test.hpp>

#include "tests/support/consumer_harness.hpp"
#include "tests/support/segment_log_files.hpp"
#include "tests/support/spool_frames.hpp"

using namespace gatewayd::test;
using gatewayd::test::segment_log_files::temp_dir;

namespace {

// Holds the spool thread in a job of a spool of its own until release() (or its end).
class spool_thread_hold {
 public:
  spool_thread_hold(gc::spool_thread& t, const std::filesystem::path& dir)
      : spool_(spool_frames::open_spool(t, dir, settled_, reader_)) {
    auto entered = std::make_shared<std::promise<void>>();
    auto in = entered->get_future();
    spool_->flush([entered, go = go_.get_future().share()] {
      entered->set_value();
      go.wait();
    });
    BOOST_REQUIRE(in.wait_for(5s) == std::future_status::ready);
  }
  ~spool_thread_hold() { release(); }
  void release() {
    if (!released_) go_.set_value();
    released_ = true;
  }

 private:
  std::atomic<std::uint64_t> settled_{0};
  std::shared_ptr<spool_frames::reader> reader_ = std::make_shared<spool_frames::reader>();
  std::shared_ptr<gc::spool> spool_;
  std::promise<void> go_;
  bool released_ = false;
};

const gc::spool_stats& spool_of(const gc::consumer& c) {
  return c.spool_files()->stats();
}

// Puts 16 KiB frames, four at a time, until the consumer asks `listener` to pause: with the
// spool thread held, once 8 MiB wait for it.
bool put_until_paused(gc::consumer& c, frame_source& src,
                      const std::shared_ptr<test_listener>& listener) {
  for (int i = 0; i < 1000; ++i)
    if (put_all(c, src.make(4), listener).paused) return true;
  return false;
}

}  // namespace

// The stall CI met (2026-12-03): the disk fell behind, so the supplier paused; then the disk
// filled, and under drop-oldest a full spool refuses frames and pauses nobody, yet the end of
// the pause waited for room that an absent consumer never makes.
BOOST_FIXTURE_TEST_CASE(a_pause_for_a_disk_behind_ends_though_the_disk_filled_meanwhile,
                        io_fixture) {
  temp_dir tmp;
  gc::spool_thread spools(10ms);
  auto c = make_spooled(spec(unused_endpoint(), 100, gc::overflow_policy::drop_oldest), spools,
                        tmp.path / "a", 1u << 20);
  auto listener = std::make_shared<test_listener>();
  frame_source src(big_payload);
  {
    spool_thread_hold hold(spools, tmp.path / "hold");
    // Away, so every frame goes to the disk, which takes none of them yet.
    BOOST_REQUIRE(put_until_paused(*c, src, listener));
    BOOST_TEST(spool_of(*c).pending_bytes.load() > gc::spool_events::behind_bytes);
    BOOST_TEST(!spool_of(*c).full.load());
  }
  // The disk takes 1 MiB and refuses the rest: full, and caught up.
  BOOST_TEST(wait_until([&] { return spool_of(*c).pending_bytes.load() == 0; }, 5s));
  BOOST_TEST(spool_of(*c).full.load());
  BOOST_TEST(spool_of(*c).refused_frames.load() > 0u);
  BOOST_TEST(spool_of(*c).frames.load() + spool_of(*c).refused_frames.load() == src.count());
  BOOST_TEST(wait_until([&] { return listener->resumed.load() == 1; }, 5s),
             "resumed " << listener->resumed.load());
  // Full, under drop-oldest: refused, counted, and nobody pauses.
  BOOST_TEST(!put_all(*c, src.make(4), listener).paused);
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
}

// The disk caught up, but more frames came before the consumer's strand looked: still behind, so
// the supplier stays paused, and the spool must say again when the disk is down (frames from
// suppliers that did not pause put it back over the mark without a pause of their own).
BOOST_FIXTURE_TEST_CASE(a_pause_kept_because_the_disk_fell_behind_again_ends_too, io_fixture) {
  temp_dir tmp;
  gc::spool_thread spools(10ms);
  auto c = make_spooled(spec(unused_endpoint(), 100, gc::overflow_policy::drop_oldest), spools,
                        tmp.path / "a", 1ull << 30);
  auto listener = std::make_shared<test_listener>();
  frame_source src(big_payload);
  auto hold = std::make_unique<spool_thread_hold>(spools, tmp.path / "hold");
  BOOST_REQUIRE(put_until_paused(*c, src, listener));
  with_io_held([&] {
    // The disk catches up: its "go on" waits on the strand, behind the test's hold.
    hold->release();
    BOOST_REQUIRE(wait_until([&] { return spool_of(*c).pending_bytes.load() == 0; }, 5s));
    // Behind again, by less than the pause mark: nobody new pauses.
    hold = std::make_unique<spool_thread_hold>(spools, tmp.path / "hold2");
    while (spool_of(*c).pending_bytes.load() <= gc::spool_events::caught_up_bytes + (1u << 20))
      BOOST_REQUIRE(!put_all(*c, src.make(4)).paused);
  });
  // What the io threads were handed before has run (they take handlers in order): the strand
  // looked, found the disk behind again, and kept the pause.
  with_io_held([] {});
  BOOST_TEST(listener->resumed.load() == 0);
  hold->release();
  BOOST_TEST(wait_until([&] { return listener->resumed.load() == 1; }, 5s),
             "resumed " << listener->resumed.load());
  BOOST_TEST(wait_until([&] { return spool_of(*c).frames.load() == src.count(); }, 5s));
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
}

// Under backpressure a full spool pauses the suppliers; the delivery that makes room ends the
// pause, though it may be the last thing the consumer does (no later write would look again).
BOOST_FIXTURE_TEST_CASE(a_pause_for_a_full_spool_under_backpressure_ends_when_a_delivery_makes_room,
                        io_fixture) {
  temp_dir tmp;
  gc::spool_thread spools(10ms);
  const gatewayd::net::endpoint at = unused_endpoint();
  const std::uint64_t max_bytes = 256u << 10;  // 16 frames of 16 KiB
  auto c = make_spooled(spec(at, 100, gc::overflow_policy::backpressure), spools, tmp.path / "a",
                        max_bytes);
  auto listener = std::make_shared<test_listener>();
  frame_source src(big_payload);
  put_all(*c, src.make(32));
  BOOST_REQUIRE(wait_until([&] { return spool_of(*c).full.load(); }, 5s));
  const auto held = spool_of(*c).frames.load();
  BOOST_TEST(held > 0u);
  BOOST_TEST(held < 32u);
  const auto t = put_all(*c, src.make(4), listener);
  BOOST_TEST(t.paused);
  BOOST_TEST(t.paused_by_consumer);
  BOOST_TEST(listener->resumed.load() == 0);
  // The consumer comes: what the spool held is delivered, and the room it leaves ends the pause.
  peer p(at.port);
  auto r = p.accept(5s);
  BOOST_REQUIRE(r);
  BOOST_REQUIRE(r->wait_frames(held, 5s));
  BOOST_TEST(wait_until([&] { return listener->resumed.load() == 1; }, 5s),
             "resumed " << listener->resumed.load());
  BOOST_TEST(wait_until([&] { return !spool_of(*c).full.load(); }, 5s));
  for (std::size_t i = 0; i < held; ++i)
    BOOST_TEST_REQUIRE(r->frames()[i] == src.frame(i));
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
}
