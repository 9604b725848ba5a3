// The consumer active object over real loopback sockets: delivery byte for byte and in order,
// fan-out from several threads, the link (redial, endpoint moves, restarts) and drain_and_close.
#include <boost/test/unit_test.hpp>

#include "tests/support/consumer_harness.hpp"

using namespace gatewayd::test;

BOOST_FIXTURE_TEST_CASE(frames_arrive_byte_for_byte_in_order, io_fixture) {
  peer p;
  auto c = make(spec(p.address(), 100000, gc::overflow_policy::drop_oldest));
  auto r = p.accept(2s);
  BOOST_REQUIRE(r);
  frame_source src(0);
  std::uint64_t bytes = 0;
  // Whether a put asks the supplier to pause depends on how fast the reader keeps up (on a
  // loaded machine it may not): a pause is flow control, not a loss, so only the order and the
  // count are asserted.
  for (int round = 0; round < 10; ++round)
    BOOST_TEST(put_all(*c, src.make(500)).queued == 500u);
  for (std::size_t i = 0; i < src.count(); ++i)
    bytes += src.frame(i).size();
  BOOST_REQUIRE(r->wait_frames(src.count(), 5s));
  BOOST_REQUIRE(r->frames().size() == src.count());
  for (std::size_t i = 0; i < src.count(); ++i) {
    BOOST_TEST_REQUIRE(r->frames()[i] == src.frame(i), "frame " << i);
  }
  BOOST_TEST(c->stats().sent_frames.load() == src.count());
  BOOST_TEST(c->stats().sent_bytes.load() == bytes);
  BOOST_TEST(c->stats().dropped_total() == 0u);
  BOOST_TEST(c->stats().connected.load());
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
  BOOST_TEST(r->wait_eof(2s));
  BOOST_TEST(!c->stats().connected.load());
}

BOOST_FIXTURE_TEST_CASE(concurrent_suppliers_and_fan_out, io_fixture) {
  peer pa;
  peer pb;
  auto a = make(spec(pa.address(), 100000, gc::overflow_policy::drop_oldest));
  auto b = make(spec(pb.address(), 100000, gc::overflow_policy::drop_oldest));
  auto ra = pa.accept(2s);
  auto rb = pb.accept(2s);
  BOOST_REQUIRE(ra);
  BOOST_REQUIRE(rb);
  // Two suppliers on two threads, each frame shared by both consumers (two references).
  frame_source s0(0, "p.zero", 2);
  frame_source s1(0, "p.one", 2);
  const auto run = [&](frame_source& s) {
    for (int round = 0; round < 20; ++round) {
      for (const auto& g : s.make(100)) {
        a->put(g, nullptr);
        b->put(g, nullptr);
      }
    }
  };
  std::thread t0(run, std::ref(s0));
  std::thread t1(run, std::ref(s1));
  t0.join();
  t1.join();
  for (auto* r : {&*ra, &*rb}) {
    BOOST_REQUIRE(r->wait_frames(4000, 5s));
    // Each supplier's frames keep their order; the two interleave arbitrarily.
    std::size_t next0 = 0;
    std::size_t next1 = 0;
    for (const auto& f : r->frames()) {
      const auto v = gs::parse_frame(f, gs::default_max_payload);
      if (v.frame.address == "p.zero") {
        BOOST_TEST_REQUIRE(f == s0.frame(next0++));
      } else {
        BOOST_TEST_REQUIRE(f == s1.frame(next1++));
      }
    }
    BOOST_TEST(next0 == 2000u);
    BOOST_TEST(next1 == 2000u);
  }
  BOOST_TEST(close_consumer(*a, 1s) == 0u);
  BOOST_TEST(close_consumer(*b, 1s) == 0u);
}

BOOST_FIXTURE_TEST_CASE(restart_resends_the_cut_frame_whole, io_fixture) {
  peer p;
  auto c = make(spec(p.address(), 100000, gc::overflow_policy::drop_oldest));
  auto r1 = p.accept(2s);
  BOOST_REQUIRE(r1);
  frame_source src(3000);
  put_all(*c, src.make(2000));
  BOOST_REQUIRE(r1->wait_frames(300, 3s));
  r1->close();  // the consumer dies with unread data: a reset, mid-batch
  BOOST_REQUIRE(wait_until([&] { return !c->stats().connected.load(); }, 2s));
  put_all(*c, src.make(500));  // put while the consumer is away

  auto r2 = p.accept(2s);
  BOOST_REQUIRE(r2);
  BOOST_REQUIRE(r2->wait_seq(src.count() - 1, 5s));
  const auto s1 = r1->seqs();
  const auto s2 = r2->seqs();
  // The new stream starts on a frame boundary (the receiver parses every byte), after what the
  // old one delivered, and has no gap: frames the kernel took for the dead peer may be lost,
  // nothing after them.
  BOOST_TEST(s2.front() > s1.back());
  for (std::size_t i = 1; i < s2.size(); ++i)
    BOOST_TEST_REQUIRE(s2[i] == s2[i - 1] + 1);
  for (std::size_t i = 0; i < s2.size(); ++i)
    BOOST_TEST_REQUIRE(r2->frames()[i] == src.frame(s2[i]));
  BOOST_TEST(c->stats().dropped_total() == 0u);
  BOOST_TEST(c->stats().reconnects.load() == 1u);
  BOOST_TEST(c->stats().sent_frames.load() >= s1.size() + s2.size());
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
}

BOOST_FIXTURE_TEST_CASE(endpoint_down_at_start_then_up, io_fixture) {
  const gatewayd::net::endpoint at = unused_endpoint();
  auto c = make(spec(at, 1000, gc::overflow_policy::drop_oldest));
  frame_source src(0);
  put_all(*c, src.make(100));
  // A few failed dials, and still queued.
  BOOST_TEST_REQUIRE(wait_until(
      [&] {
        std::uint64_t failed = 0;
        for (const auto& f : c->stats().connect_failures)
          failed += f.load();
        return failed >= 3;
      },
      5s));
  BOOST_TEST(!c->stats().connected.load());
  BOOST_TEST(c->stats().queued_frames.load() == 100u);

  peer p(at.port);
  auto r = p.accept(2s);
  BOOST_REQUIRE(r);
  BOOST_REQUIRE(r->wait_frames(100, 3s));
  for (std::size_t i = 0; i < 100; ++i)
    BOOST_TEST_REQUIRE(r->frames()[i] == src.frame(i));
  BOOST_TEST(c->stats().reconnects.load() == 0u);  // it was never connected before
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
}

BOOST_FIXTURE_TEST_CASE(drain_and_close_delivers_then_refuses, io_fixture) {
  peer p;
  auto c = make(spec(p.address(), 100000, gc::overflow_policy::drop_oldest));
  auto r = p.accept(2s);
  BOOST_REQUIRE(r);
  frame_source src(100);  // all of it fits in the socket buffers while nobody reads
  put_all(*c, src.make(1000));
  BOOST_TEST(close_consumer(*c, 3s, gc::drop_reason::removed) == 0u);
  BOOST_REQUIRE(r->wait_frames(1000, 3s));
  BOOST_TEST(r->wait_eof(2s));
  BOOST_TEST(c->stats().sent_frames.load() == 1000u);

  // Later puts are refused and counted; their references are released.
  const auto t = put_all(*c, src.make(5));
  BOOST_TEST(t.queued == 0u);
  BOOST_TEST(dropped(*c, gc::drop_reason::removed) == 5u);
  // A second drain_and_close after the close answers at once.
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
}

// A session that loaded the table still naming a consumer may hand it frames after a reload
// removed it: those are its own, and its drain takes them (nobody is paused on a consumer that
// is going away). Only once the drain has ended are puts refused, counted as `removed`.
BOOST_FIXTURE_TEST_CASE(a_draining_consumer_takes_what_was_routed_to_it_before, io_fixture) {
  auto c = make(spec(unused_endpoint(), 100, gc::overflow_policy::backpressure));
  frame_source src(100);
  BOOST_TEST(put_all(*c, src.make(100)).paused);  // full: a live consumer pauses
  auto p1 = std::make_shared<std::promise<std::uint64_t>>();
  auto left = p1->get_future();
  c->drain_and_close(300ms, gc::drop_reason::removed, [p1](std::uint64_t n) { p1->set_value(n); });
  const auto late = put_all(*c, src.make(50));  // routed by the old table, arriving late
  BOOST_TEST(late.queued == 50u);
  BOOST_TEST(!late.paused);
  BOOST_REQUIRE(left.wait_for(5s) == std::future_status::ready);
  BOOST_TEST(left.get() == 150u);
  BOOST_TEST(dropped(*c, gc::drop_reason::removed) == 150u);
  const auto after = put_all(*c, src.make(7));
  BOOST_TEST(after.queued == 0u);
  BOOST_TEST(!after.paused);
  BOOST_TEST(dropped(*c, gc::drop_reason::removed) == 157u);
}

BOOST_FIXTURE_TEST_CASE(drain_and_close_gives_up_on_an_unreachable_endpoint, io_fixture) {
  auto c = make(spec(unused_endpoint(), 1000, gc::overflow_policy::drop_oldest));
  frame_source src(100);
  put_all(*c, src.make(10));
  const auto start = std::chrono::steady_clock::now();
  BOOST_TEST(close_consumer(*c, 200ms) == 10u);
  BOOST_TEST((std::chrono::steady_clock::now() - start >= 200ms));
  BOOST_TEST(dropped(*c, gc::drop_reason::shutdown) == 10u);
  BOOST_TEST(c->stats().queued_frames.load() == 0u);
}

BOOST_FIXTURE_TEST_CASE(reconfigure_moves_to_a_new_endpoint_keeping_the_queue, io_fixture) {
  peer pa;
  peer pb;
  auto c = make(spec(pa.address(), 1000, gc::overflow_policy::drop_oldest));
  auto ra = pa.accept(2s);
  BOOST_REQUIRE(ra);
  frame_source src(100);
  put_all(*c, src.make(10));
  BOOST_REQUIRE(ra->wait_frames(10, 2s));

  c->reconfigure(spec(pb.address(), 500, gc::overflow_policy::drop_newest));
  BOOST_TEST(c->capacity() == 500u);
  BOOST_TEST((c->policy() == gc::overflow_policy::drop_newest));
  put_all(*c, src.make(10));
  BOOST_REQUIRE(ra->wait_eof(2s));
  auto rb = pb.accept(2s);
  BOOST_REQUIRE(rb);
  BOOST_REQUIRE(rb->wait_frames(10, 2s));
  const auto seqs = rb->seqs();
  for (std::size_t i = 0; i < 10; ++i)
    BOOST_TEST(seqs[i] == 10 + i);
  BOOST_TEST(ra->frames().size() == 10u);
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
}

// Two suppliers race a slow, restarting consumer under the disconnect policy: every frame put
// ends up sent or counted as dropped, every stream parses whole, every reference is released.
BOOST_FIXTURE_TEST_CASE(nothing_is_lost_silently_under_restarts, io_fixture) {
  peer p(0, 8192);
  auto c = make(spec(p.address(), 64, gc::overflow_policy::disconnect));
  std::atomic<bool> stop{false};
  std::atomic<int> connections{0};
  std::atomic<bool> corrupt{false};
  std::thread reader([&] {
    int round = 0;
    while (!stop) {
      auto r = p.accept(20ms, false);
      if (!r) continue;
      ++connections;
      // Alternate short slow readers (resets, slow-consumer closes) with steady ones.
      const auto until = std::chrono::steady_clock::now() + (++round % 2 ? 15ms : 60ms);
      while (!stop && !r->eof() && std::chrono::steady_clock::now() < until) {
        r->read_for(5ms);
        if (round % 2) std::this_thread::sleep_for(2ms);
      }
      if (r->corrupt()) corrupt = true;
    }
  });
  frame_source s0(0, "p.zero");
  frame_source s1(0, "p.one");
  const auto produce = [&](frame_source& s) {
    for (int i = 0; i < 60; ++i) {
      put_all(*c, s.make(50));
      std::this_thread::sleep_for(1ms);
    }
  };
  std::thread t0(produce, std::ref(s0));
  std::thread t1(produce, std::ref(s1));
  t0.join();
  t1.join();
  const std::uint64_t left = close_consumer(*c, 2s);
  stop = true;
  reader.join();
  const auto& st = c->stats();
  BOOST_TEST(st.sent_frames.load() + st.dropped_total() == s0.count() + s1.count());
  BOOST_TEST(dropped(*c, gc::drop_reason::shutdown) == left);
  BOOST_TEST(!corrupt.load());
  BOOST_TEST(connections.load() >= 2);
  BOOST_TEST(st.queued_frames.load() == 0u);
}
