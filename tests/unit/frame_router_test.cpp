// The frame router against a reload: a read pass routes by one table from its first frame to its
// flush, and a reload learns (route_readers) when the passes that began by an older table are
// over, which is when a consumer only that table named may start its last drain.
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "runtime/latency_histogram.hpp"
#include "runtime/lf_pool.hpp"
#include "suppliers/frame_router.hpp"
#include "suppliers/frame_routers.hpp"
#include "suppliers/route_readers.hpp"
#include "tests/support/consumer_harness.hpp"
#include "tests/support/routing_rules.hpp"

using namespace gatewayd::test;
namespace su = gatewayd::suppliers;

namespace {

// Runs steps on a thread of its own (a routing thread), one at a time, when told to.
class routing_thread {
 public:
  routing_thread() : thread_([this] { loop(); }) {}
  ~routing_thread() {
    run([this] { quit_ = true; });
    thread_.join();
  }
  void run(std::function<void()> step) {
    std::unique_lock lock(mutex_);
    step_ = std::move(step);
    cv_.notify_all();
    cv_.wait(lock, [this] { return !step_; });
  }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    while (!quit_) {
      cv_.wait(lock, [this] { return static_cast<bool>(step_); });
      step_();
      step_ = nullptr;
      cv_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::function<void()> step_;
  bool quit_ = false;
  std::thread thread_;
};

std::shared_ptr<su::route_snapshot> table_to(std::shared_ptr<gc::consumer> c) {
  auto snap = std::make_shared<su::route_snapshot>();
  snap->table =
      gatewayd::routing::routing_table::build(make_config({c->name()}, {{"t.>", {c->name()}}}));
  snap->consumers.push_back(std::move(c));
  return snap;
}

void route_all(su::frame_router& router, const std::vector<std::vector<gs::frame_slice>>& groups) {
  for (const auto& g : groups) {
    for (const auto& f : g)
      BOOST_TEST((router.route("t.seq", f) == su::frame_router::outcome::routed));
    router.hold();
  }
}

}  // namespace

BOOST_FIXTURE_TEST_CASE(a_pass_routes_by_one_table_and_holds_back_the_removal, io_fixture) {
  peer pa;
  peer pb;
  auto a = make(spec(pa.address(), 1000, gc::overflow_policy::drop_newest));
  auto sb = spec(pb.address(), 1000, gc::overflow_policy::drop_newest);
  sb.name = "other";
  auto b = make(sb);
  auto ra = pa.accept(2s);
  auto rb = pb.accept(2s);
  BOOST_REQUIRE(ra);
  BOOST_REQUIRE(rb);
  su::route_snapshot_holder holder;
  const auto v1 = holder.publish(table_to(a));
  frame_source src(100, "t.seq", 0);  // the router takes the references
  su::route_readers readers;
  su::frame_routers routers(readers);
  routing_thread t;

  su::frame_router* router = nullptr;
  t.run([&] {
    router = &routers.begin_pass(holder);
    route_all(*router, src.make(10));
  });
  BOOST_TEST(readers.all_past(v1));
  const auto v2 = holder.publish(table_to(b));
  BOOST_TEST(v2 > v1);
  // The pass that began by v1 is still open: the reload must not close `a` yet.
  BOOST_TEST(!readers.all_past(v2));
  t.run([&] { router->flush(nullptr); });
  BOOST_TEST(readers.all_past(v2));
  BOOST_TEST(ra->wait_frames(10, 2s));

  // The next pass routes by v2, from its first frame: all five reach b, none a.
  t.run([&] {
    auto& r = routers.begin_pass(holder);
    route_all(r, src.make(5));
    r.flush(nullptr);
  });
  BOOST_TEST(rb->wait_frames(5, 2s));
  BOOST_TEST(ra->frames().size() == 10u);
  BOOST_TEST(close_consumer(*a, 1s) == 0u);
  BOOST_TEST(close_consumer(*b, 1s) == 0u);
}

// A thread that routed once and then sat idle holds an old table but no pass: it must not hold
// back a reload. Nor must a router that has gone.
BOOST_FIXTURE_TEST_CASE(idle_and_finished_routers_do_not_hold_back_a_reload, io_fixture) {
  auto a = make(spec(unused_endpoint(), 1000, gc::overflow_policy::drop_newest));
  su::route_snapshot_holder holder;
  holder.publish(table_to(a));
  frame_source src(100, "t.seq", 0);
  su::route_readers readers;
  su::frame_routers routers(readers);
  routing_thread idle;
  idle.run([&] {
    auto& r = routers.begin_pass(holder);
    route_all(r, src.make(3));
    r.flush(nullptr);
  });
  {
    su::frame_router gone(readers);
    routing_thread t;
    t.run([&] { gone.begin_pass(holder); });  // a pass never ended
  }
  const auto v2 = holder.publish(table_to(a));
  BOOST_TEST(readers.all_past(v2));
  BOOST_TEST(close_consumer(*a, 200ms) == 3u);
}

// The routers of a pool: a pass on a pool thread takes that thread's router, the same one every
// time, and two passes open at once on two threads are on two routers; a thread outside the
// pool gets one of its own. Each announces its passes to the readers it was made with.
BOOST_FIXTURE_TEST_CASE(each_thread_routes_through_a_router_of_its_own, io_fixture) {
  auto a = make(spec(unused_endpoint(), 1000, gc::overflow_policy::drop_newest));
  su::route_snapshot_holder holder;
  holder.publish(table_to(a));
  asio::io_context pool_ioc;
  gatewayd::runtime::latency_histogram latency;
  gatewayd::runtime::lf_pool pool(pool_ioc, 2, latency);
  su::route_readers readers;
  su::frame_routers routers(readers, &pool);
  std::mutex mutex;
  std::map<unsigned, std::set<const su::frame_router*>> by_place;
  std::atomic<int> open{0};
  std::atomic<bool> release{false};
  std::atomic<int> done{0};
  auto pass = [&](bool wait_for_both) {
    gatewayd::runtime::lf_pool::promote_new_leader();
    auto& r = routers.begin_pass(holder);
    {
      std::lock_guard lock(mutex);
      by_place[pool.member_index()].insert(&r);
    }
    ++open;
    if (wait_for_both) (void)wait_until([&] { return release.load(); }, 5s);
    r.flush(nullptr);
    ++done;
  };
  auto work = asio::make_work_guard(pool_ioc);
  asio::post(pool_ioc, [&] { pass(true); });
  asio::post(pool_ioc, [&] { pass(true); });
  pool.start();
  BOOST_TEST(wait_until([&] { return open.load() == 2; }, 5s));
  const auto v2 = holder.publish(table_to(a));
  BOOST_TEST(!readers.all_past(v2));  // both passes began by the older table
  release = true;
  BOOST_TEST(wait_until([&] { return done.load() == 2; }, 5s));
  BOOST_TEST(readers.all_past(v2));
  for (int i = 0; i < 20; ++i)
    asio::post(pool_ioc, [&] { pass(false); });
  BOOST_TEST(wait_until([&] { return done.load() == 22; }, 5s));
  work.reset();
  pool.join();

  BOOST_TEST(by_place.size() == 2u);  // only places 0 and 1: never not_a_member
  BOOST_TEST(by_place.count(0) == 1u);
  BOOST_TEST(by_place.count(1) == 1u);
  std::set<const su::frame_router*> pool_routers;
  for (const auto& [place, used] : by_place) {
    BOOST_TEST(used.size() == 1u);  // the same router every time
    pool_routers.insert(used.begin(), used.end());
  }
  BOOST_TEST(pool_routers.size() == 2u);

  // This thread, and another, are no pool's: each gets a router of its own, and keeps it.
  auto& mine = routers.begin_pass(holder);
  mine.flush(nullptr);
  BOOST_TEST(&routers.begin_pass(holder) == &mine);
  mine.flush(nullptr);
  BOOST_TEST(pool_routers.count(&mine) == 0u);
  const su::frame_router* theirs = nullptr;
  std::thread([&] {
    auto& r = routers.begin_pass(holder);
    theirs = &r;
    r.flush(nullptr);
  }).join();
  BOOST_TEST(theirs != &mine);
  BOOST_TEST(pool_routers.count(theirs) == 0u);
  BOOST_TEST(close_consumer(*a, 200ms) == 0u);
}

// Frames that interleave addresses (each to the next consumer in turn) are answered from the
// router's route cache, three addresses and then six. Either way every frame reaches its consumers,
// every hit is counted on its route, and a reload is routed by the new table from its first frame.
BOOST_FIXTURE_TEST_CASE(interleaved_addresses_reach_their_consumers_and_count_every_hit,
                        io_fixture) {
  constexpr std::size_t n = 6;
  std::vector<std::unique_ptr<peer>> peers;
  std::vector<std::shared_ptr<gc::consumer>> consumers;
  std::vector<std::string> names;
  for (std::size_t i = 0; i <= n; ++i) {  // c0..c5, and `all` (index n)
    peers.push_back(std::make_unique<peer>());
    auto s = spec(peers.back()->address(), 1000, gc::overflow_policy::drop_newest);
    s.name = i < n ? numbered("c", i) : std::string{"all"};
    names.push_back(s.name);
    consumers.push_back(make(s));
  }
  std::vector<receiver> receivers;
  for (auto& p : peers) {
    auto r = p->accept(2s);
    BOOST_REQUIRE(r);
    receivers.push_back(std::move(*r));
  }
  // m.i -> ci (`swap`: m.0 and m.1 swap consumers), and m.* -> all.
  auto table = [&](bool swap) {
    std::vector<route_def> routes;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t to = swap && i < 2 ? 1 - i : i;
      routes.push_back({numbered("m.", i), {names[to]}});
    }
    routes.push_back({"m.*", {"all"}});
    auto snap = std::make_shared<su::route_snapshot>();
    snap->table = gatewayd::routing::routing_table::build(make_config(names, routes));
    snap->consumers = consumers;
    return snap;
  };
  su::route_snapshot_holder holder;
  holder.publish(table(false));
  const auto first = holder.load();
  frame_source src(100, "t.seq", 0);
  std::vector<std::string> addresses;
  for (std::size_t i = 0; i < n; ++i)
    addresses.push_back(numbered("m.", i));

  // 30 frames over m.0..m.2, then 61 over m.0..m.5 (the last to m.0, which the cache then
  // holds), then one nobody routes.
  std::vector<std::size_t> expected(n + 1, 0);
  su::route_readers readers;
  su::frame_routers routers(readers);
  routing_thread t;
  t.run([&] {
    auto& r = routers.begin_pass(holder);
    std::size_t k = 0;
    for (const auto& group : src.make(91)) {
      for (const auto& f : group) {
        const std::size_t a = k < 30 ? k % 3 : (k - 30) % n;
        BOOST_TEST((r.route(addresses[a], f) == su::frame_router::outcome::routed));
        ++expected[a];
        ++expected[n];
        ++k;
      }
      r.hold();
    }
    BOOST_TEST(
        (r.route("x.y", src.make(1).front().front()) == su::frame_router::outcome::unroutable));
    r.hold();
    r.flush(nullptr);
  });
  for (std::size_t i = 0; i <= n; ++i) {
    BOOST_TEST_CONTEXT("consumer " << names[i]) {
      BOOST_TEST(receivers[i].wait_frames(expected[i], 2s));
    }
  }
  for (std::size_t route = 0; route <= n; ++route) {
    BOOST_TEST_CONTEXT("route " << route) {
      BOOST_TEST(first->pattern_hits[first->table->route_pattern(route)].load() == expected[route]);
    }
  }

  // The new table swaps m.0 and m.1: the cache's answers for them are the old table's.
  holder.publish(table(true));
  t.run([&] {
    auto& r = routers.begin_pass(holder);
    for (const auto& group : src.make(4)) {
      for (const auto& f : group)
        BOOST_TEST((r.route(addresses[0], f) == su::frame_router::outcome::routed));
      r.hold();
    }
    r.flush(nullptr);
  });
  BOOST_TEST(receivers[1].wait_frames(expected[1] + 4, 2s));
  BOOST_TEST(receivers[0].frames().size() == expected[0]);
  for (auto& c : consumers)
    BOOST_TEST(close_consumer(*c, 1s) == 0u);
}
