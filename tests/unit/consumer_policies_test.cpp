// The overflow policies and byte caps as a running consumer applies them, over real loopback
// sockets (admission_test holds the same rules to the pure function, without a network).
#include <boost/test/unit_test.hpp>

#include "tests/support/consumer_harness.hpp"

using namespace gatewayd::test;

BOOST_FIXTURE_TEST_CASE(drop_oldest_keeps_the_newest, io_fixture) {
  peer p(0, 4096);
  auto c = make(spec(p.address(), 16, gc::overflow_policy::drop_oldest));
  auto r = p.accept(2s);
  BOOST_REQUIRE(r);
  frame_source src(big_payload);
  fill_until_stuck(*c, src);
  const auto t = put_all(*c, src.make(64));
  BOOST_TEST(t.queued == 64u);  // drop-oldest always takes the new frame
  BOOST_TEST(c->stats().queued_frames.load() == 16u);
  const std::uint64_t drops = dropped(*c, gc::drop_reason::queue_full);
  BOOST_TEST(drops >= 48u);
  BOOST_TEST(c->stats().dropped_total() == drops);

  BOOST_REQUIRE(r->wait_frames(src.count() - drops, 5s));
  const auto seqs = r->seqs();
  BOOST_TEST(seqs.size() == src.count() - drops);
  for (std::size_t i = 1; i < seqs.size(); ++i)
    BOOST_TEST_REQUIRE(seqs[i] > seqs[i - 1]);
  // The queue's 16 frames were the 16 newest.
  for (std::size_t i = 0; i < 16; ++i) {
    BOOST_TEST(seqs[seqs.size() - 16 + i] == src.count() - 16 + i);
  }
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
}

BOOST_FIXTURE_TEST_CASE(drop_newest_keeps_the_oldest, io_fixture) {
  peer p(0, 4096);
  auto c = make(spec(p.address(), 16, gc::overflow_policy::drop_newest));
  auto r = p.accept(2s);
  BOOST_REQUIRE(r);
  frame_source src(big_payload);
  fill_until_stuck(*c, src);
  const auto t = put_all(*c, src.make(64));
  BOOST_TEST(t.queued < 64u);
  BOOST_TEST(c->stats().queued_frames.load() == 16u);
  const std::uint64_t drops = dropped(*c, gc::drop_reason::queue_full);
  BOOST_TEST(drops == 64u - t.queued);

  // What arrives is exactly the first frames, without a gap: the refused ones are the newest.
  BOOST_REQUIRE(r->wait_frames(src.count() - drops, 5s));
  const auto seqs = r->seqs();
  BOOST_TEST(seqs.size() == src.count() - drops);
  for (std::size_t i = 0; i < seqs.size(); ++i)
    BOOST_TEST_REQUIRE(seqs[i] == i);
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
}

BOOST_FIXTURE_TEST_CASE(disconnect_discards_the_queue_and_redials, io_fixture) {
  peer p(0, 4096);
  auto c = make(spec(p.address(), 16, gc::overflow_policy::disconnect));
  auto r1 = p.accept(2s);
  BOOST_REQUIRE(r1);
  frame_source src(big_payload);
  fill_until_stuck(*c, src);
  put_all(*c, src.make(64));
  const std::uint64_t slow = dropped(*c, gc::drop_reason::slow_consumer);
  BOOST_TEST(slow > 0u);

  // The first connection ends (after what the kernel had accepted), a second one comes.
  BOOST_REQUIRE(r1->wait_eof(3s));
  auto r2 = p.accept(2s);
  BOOST_REQUIRE(r2);
  BOOST_REQUIRE(wait_until([&] { return c->stats().connected.load(); }, 2s));
  // What was left in the queue after the discard goes to the new connection, whole.
  const std::uint64_t queued_after = src.count() - r1->frames().size() - c->stats().dropped_total();
  BOOST_REQUIRE(r2->wait_frames(queued_after, 3s));
  const auto s1 = r1->seqs();
  const auto s2 = r2->seqs();
  BOOST_TEST(s1.size() + s2.size() + c->stats().dropped_total() == src.count());
  if (!s1.empty() && !s2.empty()) BOOST_TEST(s2.front() > s1.back());
  for (std::size_t i = 1; i < s2.size(); ++i)
    BOOST_TEST(s2[i] > s2[i - 1]);
  if (!s2.empty()) BOOST_TEST(s2.back() == src.count() - 1);
  BOOST_TEST(c->stats().reconnects.load() == 1u);
  BOOST_TEST(c->stats().dropped_total() == dropped(*c, gc::drop_reason::slow_consumer));
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
}

BOOST_FIXTURE_TEST_CASE(backpressure_drops_nothing_pauses_and_resumes, io_fixture) {
  peer p(0, 4096);
  auto c = make(spec(p.address(), 16, gc::overflow_policy::backpressure));
  auto r = p.accept(2s);
  BOOST_REQUIRE(r);
  auto listener = std::make_shared<test_listener>();
  frame_source src(big_payload);
  fill_until_stuck(*c, src);
  BOOST_REQUIRE(wait_until([&] { return c->stats().congested.load(); }, 2s));  // it stalled
  const auto before = c->stats().queued_frames.load();
  const auto t = put_all(*c, src.make(64), listener);
  BOOST_TEST(t.queued == 64u);
  BOOST_TEST(t.paused);
  BOOST_TEST(t.paused_by_consumer);  // a stalled consumer's: the connection cap may reclaim it
  BOOST_TEST(c->stats().queued_frames.load() == before + 64);  // beyond capacity, bounded
  BOOST_TEST(c->stats().dropped_total() == 0u);
  BOOST_TEST(listener->resumed.load() == 0);

  // The reader catches up: everything arrives, and the supplier is resumed once.
  BOOST_REQUIRE(r->wait_frames(src.count(), 5s));
  for (std::size_t i = 0; i < src.count(); ++i)
    BOOST_TEST_REQUIRE(r->frames()[i] == src.frame(i));
  BOOST_TEST(wait_until([&] { return listener->resumed.load() == 1; }, 2s));
  BOOST_TEST(c->stats().dropped_total() == 0u);
  // Below capacity again: no pause.
  BOOST_TEST(!put_all(*c, src.make(4), listener).paused);
  BOOST_TEST(r->wait_frames(src.count(), 2s));
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
  BOOST_TEST(listener->resumed.load() == 1);
}

BOOST_FIXTURE_TEST_CASE(byte_cap_drop_oldest_keeps_the_newest_while_away, io_fixture) {
  const gatewayd::net::endpoint at = unused_endpoint();
  frame_source src(1000);
  const std::uint64_t frame_size = 10 + 5 + 1000;  // header, "t.seq", payload
  auto c = make(spec(at, 1000, gc::overflow_policy::drop_oldest, 10 * frame_size));
  put_all(*c, src.make(30));
  BOOST_TEST(c->stats().queued_frames.load() == 10u);
  BOOST_TEST(c->stats().queued_bytes.load() == 10 * frame_size);
  BOOST_TEST(dropped(*c, gc::drop_reason::queue_bytes) == 20u);

  peer p(at.port);
  auto r = p.accept(2s);
  BOOST_REQUIRE(r);
  BOOST_REQUIRE(r->wait_frames(10, 3s));
  const auto seqs = r->seqs();
  for (std::size_t i = 0; i < 10; ++i)
    BOOST_TEST(seqs[i] == 20 + i);
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
}

BOOST_FIXTURE_TEST_CASE(global_budget_drops_count_as_global_bytes, io_fixture) {
  frame_source src(1000);
  const std::uint64_t frame_size = 10 + 5 + 1000;  // header, "t.seq", payload
  gatewayd::runtime::byte_budget budget(20 * frame_size + 100);
  auto a = make(spec(unused_endpoint(), 1000, gc::overflow_policy::drop_newest), &budget);
  auto b = make(spec(unused_endpoint(), 1000, gc::overflow_policy::drop_oldest), &budget);

  BOOST_TEST(put_all(*a, src.make(30)).queued == 20u);
  BOOST_TEST(dropped(*a, gc::drop_reason::global_bytes) == 10u);
  BOOST_TEST(budget.used() == 20 * frame_size);

  // The budget is full of a's frames: b has nothing of its own to evict.
  BOOST_TEST(put_all(*b, src.make(5)).queued == 0u);
  BOOST_TEST(dropped(*b, gc::drop_reason::global_bytes) == 5u);

  BOOST_TEST(close_consumer(*a, 50ms) == 20u);
  BOOST_TEST(budget.used() == 0u);

  // Now b fills the budget alone and then evicts its own oldest to make room.
  BOOST_TEST(put_all(*b, src.make(30)).queued == 30u);
  BOOST_TEST(b->stats().queued_frames.load() == 20u);
  BOOST_TEST(dropped(*b, gc::drop_reason::global_bytes) == 15u);
  BOOST_TEST(budget.used() == 20 * frame_size);
  BOOST_TEST(close_consumer(*b, 50ms) == 20u);
  BOOST_TEST(budget.used() == 0u);
}

BOOST_AUTO_TEST_CASE(drop_reason_names) {
  BOOST_TEST(gc::to_string(gc::drop_reason::queue_full) == "queue_full");
  BOOST_TEST(gc::to_string(gc::drop_reason::queue_bytes) == "queue_bytes");
  BOOST_TEST(gc::to_string(gc::drop_reason::global_bytes) == "global_bytes");
  BOOST_TEST(gc::to_string(gc::drop_reason::slow_consumer) == "slow_consumer");
  BOOST_TEST(gc::to_string(gc::drop_reason::removed) == "removed");
  BOOST_TEST(gc::to_string(gc::drop_reason::shutdown) == "shutdown");
}

// A consumer that stops reading is given slow_after to catch up before its policy may drop. The
// suppliers it shares with healthy consumers must not wait that out with it: while its socket
// refuses bytes, its queue fills to its own limit without pausing anyone (the gateway's
// high-water mark is for a consumer the gateway itself is behind on), and only a full queue
// pauses them, since its grace forbids dropping. Nothing is lost; all of it arrives once the
// peer reads.
BOOST_FIXTURE_TEST_CASE(a_stalled_consumer_in_its_grace_pauses_nobody_before_its_queue_is_full,
                        io_fixture) {
  peer p(0, 4096);
  constexpr std::uint32_t capacity = 12000;  // high-water mark: 4096 frames
  auto c = make(spec(p.address(), capacity, gc::overflow_policy::drop_oldest), nullptr, {}, 10s);
  auto r = p.accept(2s);
  BOOST_REQUIRE(r);
  auto listener = std::make_shared<test_listener>();
  frame_source big(big_payload);
  fill_until_stuck(*c, big);
  frame_source small(64);
  std::uint64_t put = 0;
  while (c->stats().queued_frames.load() + 100 < capacity) {
    BOOST_TEST_REQUIRE(!put_all(*c, small.make(100), listener).paused);
    put += 100;
  }
  BOOST_TEST(put > 2 * 4096u);  // well past the high-water mark
  bool paused = false;
  for (int i = 0; i < 3 && !paused; ++i)
    paused = put_all(*c, small.make(100), listener).paused;
  BOOST_TEST(paused);  // at the limit
  BOOST_TEST(c->stats().dropped_total() == 0u);

  BOOST_REQUIRE(r->wait_frames(big.count() + small.count(), 10s));
  BOOST_TEST(wait_until([&] { return listener->resumed.load() == 1; }, 2s));
  BOOST_TEST(c->stats().dropped_total() == 0u);
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
}

// The gateway paused the supplier at the high-water mark while the consumer's socket still took
// bytes (the gateway was behind); then the consumer stopped reading. From its first refusal only
// a full queue may hold the supplier: it is let go at once, not when the grace (10 s here) ends.
BOOST_FIXTURE_TEST_CASE(a_pause_at_the_high_water_mark_ends_when_the_socket_refuses, io_fixture) {
  peer p(0, 4096);
  auto c = make(spec(p.address(), 12000, gc::overflow_policy::drop_oldest), nullptr, {}, 10s);
  auto r = p.accept(2s);
  BOOST_REQUIRE(r);
  // Until its link is up a consumer counts as congested (the gateway is not behind on it) and
  // pauses nobody below its limits.
  BOOST_REQUIRE(wait_until([&] { return !c->stats().congested.load(); }, 2s));
  auto listener = std::make_shared<test_listener>();
  frame_source big(big_payload);
  // ~10 MB while the io threads are held: past the 4 MiB high-water mark before the drain has
  // written anything (a drain racing the puts could fill the socket first, and a refusing
  // socket pauses nobody below the limits), and more than the socket buffers hold, so the
  // socket refuses once the drain writes.
  const auto t = with_io_held([&] { return put_all(*c, big.make(640), listener); });
  BOOST_TEST_REQUIRE(t.paused);
  // A drop-oldest consumer lets it go within its grace at the latest: the connection cap never
  // reclaims a supplier it paused.
  BOOST_TEST(!t.paused_by_consumer);
  BOOST_TEST(wait_until([&] { return listener->resumed.load() == 1; }, 3s));
  BOOST_TEST(c->stats().dropped_total() == 0u);
  BOOST_REQUIRE(r->wait_frames(big.count(), 10s));
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
}

// What a consumer queued while it still counted as keeping up (every frame, past its limits)
// meets its policy the moment it becomes congested, not only what comes after: the queue is
// within its limits within slow_after of the stall even when nothing more is put (the issue
// saw 5.8x queue_capacity held for as long as the consumer stalled).
namespace {

constexpr std::uint32_t overshoot_capacity = 500;
constexpr std::size_t overshoot_frames = 2000;

// The frames of `r` sent to `address`, by their numbers.
std::vector<std::size_t> seqs_to(const receiver& r, std::string_view address) {
  std::vector<std::size_t> out;
  for (const auto& f : r.frames()) {
    const auto p = gs::parse_frame(f, gs::default_max_payload);
    if (p.state == gs::parse_result::status::frame && p.frame.address == address)
      out.push_back(seq_of(f));
  }
  return out;
}

struct overshoot {
  io_fixture& io;
  peer p{0, 4096};
  std::shared_ptr<gc::consumer> c;
  std::optional<receiver> r;
  frame_source big{big_payload, "t.fill"};
  frame_source small{64, "t.small"};

  // A consumer with `policy` whose socket stopped taking bytes, given 1 s to catch up, is put
  // 2,000 small frames within that grace: all of them queue, 4x its capacity of 500.
  overshoot(io_fixture& fixture, gc::overflow_policy policy) : io(fixture) {
    c = io.make(spec(p.address(), overshoot_capacity, policy), nullptr, {}, 1s);
    r = p.accept(2s);
    BOOST_REQUIRE(r);
    BOOST_REQUIRE(wait_until([&] { return !c->stats().congested.load(); }, 2s));
    fill_until_stuck(*c, big);
    auto listener = std::make_shared<test_listener>();
    put_all(*c, small.make(overshoot_frames), listener);
    BOOST_TEST_REQUIRE(c->stats().queued_frames.load() == overshoot_frames);
    BOOST_TEST_REQUIRE(!c->stats().congested.load());
    BOOST_TEST_REQUIRE(c->stats().dropped_total() == 0u);
  }
  // True once the queue is within its capacity (after the grace: nothing else trims it).
  bool held_to_capacity() {
    return wait_until([&] { return c->stats().queued_frames.load() <= overshoot_capacity; }, 4s);
  }
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(falling_behind_drop_oldest_trims_the_oldest_of_what_it_holds, io_fixture) {
  overshoot o(*this, gc::overflow_policy::drop_oldest);
  BOOST_TEST_REQUIRE(o.held_to_capacity());
  BOOST_TEST(o.c->stats().congested.load());
  BOOST_TEST(o.c->stats().queued_frames.load() == overshoot_capacity);
  BOOST_TEST(dropped(*o.c, gc::drop_reason::queue_full) == overshoot_frames - overshoot_capacity);
  BOOST_TEST(o.c->stats().dropped_total() == overshoot_frames - overshoot_capacity);
  // Once the peer reads: every fill frame, then the 500 newest small ones, in order.
  BOOST_REQUIRE(o.r->wait_frames(o.big.count() + overshoot_capacity, 10s));
  const auto s = seqs_to(*o.r, "t.small");
  BOOST_TEST_REQUIRE(s.size() == overshoot_capacity);
  for (std::size_t i = 0; i < s.size(); ++i)
    BOOST_TEST_REQUIRE(s[i] == overshoot_frames - overshoot_capacity + i);
  BOOST_TEST(seqs_to(*o.r, "t.fill").size() == o.big.count());
  BOOST_TEST(close_consumer(*o.c, 1s) == 0u);
}

BOOST_FIXTURE_TEST_CASE(falling_behind_drop_newest_trims_the_newest_of_what_it_holds, io_fixture) {
  overshoot o(*this, gc::overflow_policy::drop_newest);
  BOOST_TEST_REQUIRE(o.held_to_capacity());
  BOOST_TEST(o.c->stats().queued_frames.load() == overshoot_capacity);
  BOOST_TEST(dropped(*o.c, gc::drop_reason::queue_full) == overshoot_frames - overshoot_capacity);
  BOOST_REQUIRE(o.r->wait_frames(o.big.count() + overshoot_capacity, 10s));
  const auto s = seqs_to(*o.r, "t.small");
  BOOST_TEST_REQUIRE(s.size() == overshoot_capacity);
  for (std::size_t i = 0; i < s.size(); ++i)
    BOOST_TEST_REQUIRE(s[i] == i);  // the oldest, without a gap
  BOOST_TEST(close_consumer(*o.c, 1s) == 0u);
}

BOOST_FIXTURE_TEST_CASE(falling_behind_disconnect_discards_a_backlog_over_its_limits, io_fixture) {
  overshoot o(*this, gc::overflow_policy::disconnect);
  BOOST_TEST_REQUIRE(o.held_to_capacity());
  BOOST_TEST(o.c->stats().queued_frames.load() == 0u);
  BOOST_TEST(dropped(*o.c, gc::drop_reason::slow_consumer) >= overshoot_frames);
  // The link is dropped as a put that did not fit drops it, and redialled.
  BOOST_TEST(wait_until(
      [&] {
        return o.c->stats()
                   .disconnects[static_cast<std::size_t>(gc::disconnect_reason::slow_consumer)]
                   .load() == 1;
      },
      2s));
  BOOST_REQUIRE(o.r->wait_eof(5s));
  BOOST_TEST(seqs_to(*o.r, "t.small").empty());
  BOOST_TEST(o.p.accept(3s).has_value());
  BOOST_TEST(close_consumer(*o.c, 1s) == 0u);
}

BOOST_FIXTURE_TEST_CASE(falling_behind_backpressure_keeps_what_it_holds, io_fixture) {
  overshoot o(*this, gc::overflow_policy::backpressure);
  BOOST_TEST_REQUIRE(wait_until([&] { return o.c->stats().congested.load(); }, 3s));
  BOOST_TEST(o.c->stats().queued_frames.load() >= overshoot_frames);
  BOOST_TEST(o.c->stats().dropped_total() == 0u);
  BOOST_REQUIRE(o.r->wait_frames(o.big.count() + overshoot_frames, 10s));
  BOOST_TEST(seqs_to(*o.r, "t.small").size() == overshoot_frames);
  BOOST_TEST(close_consumer(*o.c, 1s) == 0u);
}

// A backpressure consumer that keeps up pauses its supplier at the gateway's high-water mark, a
// pause of moments that the connection cap must not reclaim (a busy honest supplier would lose
// its connection to a flood). When that consumer then stalls, it holds the supplier until it has
// drained to half its limits, however long that takes: it tells it so when it falls behind, and
// from then on the cap may reclaim it. Once the peer reads, the supplier is resumed.
BOOST_FIXTURE_TEST_CASE(a_backpressure_consumer_that_falls_behind_tells_the_suppliers_it_holds,
                        io_fixture) {
  peer p(0, 4096);
  auto c = make(spec(p.address(), 300, gc::overflow_policy::backpressure));
  auto r = p.accept(2s);
  BOOST_REQUIRE(r);
  BOOST_REQUIRE(wait_until([&] { return !c->stats().congested.load(); }, 2s));
  auto listener = std::make_shared<test_listener>();
  frame_source big(big_payload);
  // 640 frames of 16 KiB (10 MB) while the io threads are held: past the limit before the drain
  // writes, and so much more than the socket buffers take (a few MB) that the queue is still
  // above half its capacity when the socket refuses: the supplier stays paused.
  const auto t = with_io_held([&] { return put_all(*c, big.make(640), listener); });
  BOOST_TEST_REQUIRE(t.paused);
  BOOST_TEST(!t.paused_by_consumer);  // it still keeps up: a pause of moments
  BOOST_TEST(wait_until([&] { return c->stats().congested.load(); }, 3s));
  BOOST_TEST(wait_until([&] { return listener->held.load() >= 1; }, 2s));
  BOOST_TEST(listener->resumed.load() == 0);
  // A put now, while it is congested and full, says so itself.
  BOOST_TEST(put_all(*c, big.make(1), listener).paused_by_consumer);
  BOOST_REQUIRE(r->wait_frames(big.count(), 10s));
  BOOST_TEST(wait_until([&] { return listener->resumed.load() == 1; }, 3s));
  BOOST_TEST(c->stats().dropped_total() == 0u);
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
}
