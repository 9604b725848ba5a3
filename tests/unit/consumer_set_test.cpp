// The gateway's consumer set against real consumers dialing loopback peers and tables parsed
// from real routes TOML: a reload keeps, reconfigures, adds and retires consumers by name and
// publishes a snapshot that names the right ones; a removed consumer waits for the read passes
// on older tables; the stop drains every consumer and reports what it left.
#include <boost/test/unit_test.hpp>

#include <future>
#include <map>

#include "config/routes_loader.hpp"
#include "gateway/consumer_set.hpp"
#include "suppliers/route_readers.hpp"
#include "tests/support/consumer_harness.hpp"

using namespace gatewayd::test;
namespace gw = gatewayd::gateway;

namespace {

struct consumer_line {
  std::string name;
  gatewayd::net::endpoint at;
  std::uint32_t capacity = 1000;
};

// A routes.toml naming `consumers`, each routed "NAME.>".
gatewayd::config::routes_config parse(const std::vector<consumer_line>& consumers) {
  std::string text;
  for (const auto& c : consumers) {
    text += "[consumers." + c.name + "]\nendpoint = \"" + c.at.host + ":" +
            std::to_string(c.at.port) + "\"\nqueue_capacity = " + std::to_string(c.capacity) + "\n";
  }
  for (const auto& c : consumers)
    text += "[[routes]]\nmatch = \"" + c.name + ".>\"\nto = [\"" + c.name + "\"]\n";
  auto r = gatewayd::config::parse_routes_config(text, "routes.toml");
  BOOST_TEST_REQUIRE(r.errors.empty(), (r.errors.empty() ? "" : r.errors.front().to_string()));
  return *r.config;
}

std::vector<std::string> names(const std::vector<std::shared_ptr<gc::consumer>>& cs) {
  std::vector<std::string> out;
  for (const auto& c : cs)
    out.push_back(c->name());
  return out;
}

// The consumers the snapshot's table routes `address` to, by name.
std::vector<std::string> routed(const gatewayd::suppliers::route_snapshot& s,
                                std::string_view address) {
  gatewayd::routing::lookup_scratch scratch;
  std::vector<std::string> out;
  for (const auto i : s.table->lookup(address, scratch).consumers)
    out.push_back(s.consumers.at(i)->name());
  return out;
}

gatewayd::config::service_config settings() {
  gatewayd::config::service_config s;
  s.reconnect_initial = 20ms;
  s.reconnect_max = 200ms;
  s.drain_timeout = 3s;
  return s;
}

// A consumer set run, as in the gateway, on a control strand of an io_context with two threads.
struct set_fixture : io_fixture {
  gatewayd::config::service_config running = settings();
  gatewayd::runtime::strand control =
      gatewayd::runtime::make_strand(gatewayd::runtime::make_executor(ioc));
  gw::consumer_set set{gatewayd::runtime::make_executor(ioc), control, running,
                       std::make_shared<gatewayd::routing::publish_drop_counters>()};

  // What the set cancelled (its retirement's poll) completes on the control strand before the
  // set is gone.
  ~set_fixture() {
    on_control([] {});
  }

  // Runs `f` on the control strand and waits for it.
  template <class F>
  void on_control(F f) {
    run_on(control, std::move(f));
  }
  void apply(const gatewayd::config::routes_config& routes) {
    on_control(
        [&] { set.apply(routes, "sha", gatewayd::routing::routing_table::build(routes.rules())); });
  }
  std::shared_ptr<const gatewayd::suppliers::route_snapshot> snapshot() const {
    return set.routes().load();
  }
  std::shared_ptr<gc::consumer> named(const std::string& name) const {
    for (const auto& c : snapshot()->consumers) {
      if (c->name() == name) return c;
    }
    return nullptr;
  }
  // The stop's drain, waiting for its report of what was left.
  std::uint64_t drain(std::chrono::milliseconds within) {
    std::promise<std::uint64_t> left;
    on_control([&] { set.drain(within, [&](std::uint64_t n) { left.set_value(n); }); });
    auto f = left.get_future();
    BOOST_REQUIRE(f.wait_for(within + 5s) == std::future_status::ready);
    return f.get();
  }
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(a_reload_keeps_reconfigures_adds_and_retires_consumers_by_name,
                        set_fixture) {
  peer pa;
  peer pb;
  peer pc;
  apply(parse({{"a", pa.address(), 100}, {"b", pb.address()}}));
  auto ra = pa.accept(5s);
  auto rb = pb.accept(5s);
  BOOST_REQUIRE(ra);
  BOOST_REQUIRE(rb);
  const auto a = named("a");
  const auto b = named("b");
  BOOST_TEST(routed(*snapshot(), "a.x") == std::vector<std::string>{"a"});
  frame_source for_b(0, "b.x");
  BOOST_TEST(put_all(*b, for_b.make(50)).queued == 50u);
  const auto first = snapshot()->version;

  // a kept (capacity changed), b removed, c added.
  apply(parse({{"a", pa.address(), 200}, {"c", pc.address()}}));
  const auto s = snapshot();
  BOOST_TEST(s->version > first);
  BOOST_TEST(names(s->consumers) == (std::vector<std::string>{"a", "c"}));
  BOOST_TEST(routed(*s, "a.x") == std::vector<std::string>{"a"});
  BOOST_TEST(routed(*s, "c.x") == std::vector<std::string>{"c"});
  BOOST_TEST(routed(*s, "b.x").empty());
  BOOST_TEST(set.size() == 2u);

  // The kept consumer is the same object, reconfigured in place on its first connection.
  BOOST_TEST(s->consumers[0] == a);
  BOOST_TEST(a->capacity() == 200u);
  frame_source for_a(0, "a.x");
  put_all(*a, for_a.make(10));
  BOOST_TEST(ra->wait_frames(10, 5s));
  BOOST_TEST(a->stats().reconnects.load() == 0u);
  // The new one dials its endpoint.
  auto rc = pc.accept(5s);
  BOOST_REQUIRE(rc);
  frame_source for_c(0, "c.x");
  put_all(*s->consumers[1], for_c.make(10));
  BOOST_TEST(rc->wait_frames(10, 5s));

  // The removed one is exported beside the new table, delivers what it held and closes.
  BOOST_TEST(names(s->retired) == std::vector<std::string>{"b"});
  BOOST_TEST(rb->wait_frames(50, 5s));
  BOOST_TEST(rb->wait_eof(5s));
  BOOST_TEST(dropped(*b, gc::drop_reason::removed) == 0u);
  // Its drain is over (a second close shares it and reports after it; the set learns of it on
  // the control strand before the round trip below).
  BOOST_TEST(close_consumer(*b, 1s, gc::drop_reason::removed) == 0u);
  on_control([] {});

  // Exported once more by the next table after it closed, so a scrape reads its last counts,
  // then forgotten.
  const auto again = parse({{"a", pa.address(), 200}, {"c", pc.address()}});
  apply(again);
  BOOST_TEST(names(snapshot()->retired) == std::vector<std::string>{"b"});
  apply(again);
  BOOST_TEST(snapshot()->retired.empty());
  BOOST_TEST(snapshot()->consumers[0] == a);

  BOOST_TEST(drain(1s) == 0u);
  BOOST_TEST(ra->wait_eof(5s));
  BOOST_TEST(rc->wait_eof(5s));
}

// A read pass that began by the older table may still hand frames to the consumer that table
// named: the removed consumer takes them and drains only once that pass is over.
BOOST_FIXTURE_TEST_CASE(a_removed_consumer_drains_only_after_the_passes_on_older_tables,
                        set_fixture) {
  peer pa;
  peer pb;
  apply(parse({{"a", pa.address()}, {"b", pb.address()}}));
  auto ra = pa.accept(5s);
  auto rb = pb.accept(5s);
  BOOST_REQUIRE(ra);
  BOOST_REQUIRE(rb);
  const auto b = named("b");

  gatewayd::suppliers::route_readers::slot pass(set.readers());  // routing by the first table
  pass.enter(snapshot()->version);
  apply(parse({{"a", pa.address()}}));
  BOOST_TEST(names(snapshot()->retired) == std::vector<std::string>{"b"});
  frame_source late(0, "b.x");
  BOOST_TEST(put_all(*b, late.make(20)).queued == 20u);
  BOOST_TEST(rb->wait_frames(20, 5s));
  // Still open while the pass lasts: nothing closes it (a drain started now would, at once,
  // its queue being empty).
  BOOST_TEST(!rb->wait_eof(300ms));
  BOOST_TEST(b->stats().connected.load());

  pass.leave();
  BOOST_TEST(rb->wait_eof(5s));
  BOOST_TEST(dropped(*b, gc::drop_reason::removed) == 0u);
  BOOST_TEST(b->stats().sent_frames.load() == 20u);
  BOOST_TEST(drain(1s) == 0u);
  BOOST_TEST(ra->wait_eof(5s));
}

BOOST_FIXTURE_TEST_CASE(the_stop_drains_every_consumer_and_reports_what_was_left, set_fixture) {
  BOOST_TEST(drain(1s) == 0u);  // nothing runs: reported at once

  peer pa;
  apply(parse({{"a", pa.address()}, {"down", unused_endpoint()}}));
  auto ra = pa.accept(5s);
  BOOST_REQUIRE(ra);
  frame_source for_a(0, "a.x");
  frame_source for_down(0, "down.x");
  put_all(*named("a"), for_a.make(30));
  put_all(*named("down"), for_down.make(12));
  // Delivered before the drain starts: what it leaves must not depend on how fast a loaded
  // machine writes 30 frames within the drain's 200 ms.
  BOOST_TEST(ra->wait_frames(30, 5s));
  // "down" never connects: its 12 frames are what the drain leaves, counted as shutdown drops.
  BOOST_TEST(drain(200ms) == 12u);
  BOOST_TEST(dropped(*named("down"), gc::drop_reason::shutdown) == 12u);
  BOOST_TEST(dropped(*named("a"), gc::drop_reason::shutdown) == 0u);
  BOOST_TEST(ra->wait_eof(5s));
}

BOOST_FIXTURE_TEST_CASE(cut_short_ends_a_long_drain_now, set_fixture) {
  apply(parse({{"down", unused_endpoint()}}));
  frame_source src(0, "down.x");
  put_all(*named("down"), src.make(7));
  std::promise<std::uint64_t> left;
  on_control([&] {
    set.drain(60s, [&](std::uint64_t n) { left.set_value(n); });
    set.cut_short();
  });
  auto f = left.get_future();
  // Far sooner than the drain's own minute.
  BOOST_REQUIRE(f.wait_for(10s) == std::future_status::ready);
  BOOST_TEST(f.get() == 7u);
}

// A second signal after the running consumers drained still ends the drain of one a reload
// removed, which runs on its own (long) deadline.
BOOST_FIXTURE_TEST_CASE(cut_short_also_ends_a_retired_consumers_drain, set_fixture) {
  running.drain_timeout = 60s;
  apply(parse({{"down", unused_endpoint()}}));
  const auto down = named("down");
  frame_source src(0, "down.x");
  BOOST_TEST(put_all(*down, src.make(5)).queued == 5u);
  apply(parse({}));
  BOOST_TEST(names(snapshot()->retired) == std::vector<std::string>{"down"});
  BOOST_TEST(drain(1s) == 0u);  // no running consumer: reported at once
  BOOST_TEST(!down->stats().connected.load());
  on_control([&] { set.cut_short(); });
  // Far sooner than its own minute: its 5 frames are dropped as removed.
  BOOST_TEST(wait_until([&] { return dropped(*down, gc::drop_reason::removed) == 5u; }, 10s));
}

// A group (endpoints = [...]) is one routing target over one consumer per member; a reload keeps
// a member by its endpoint (the same object, joined to the new group), adds and retires others.
BOOST_FIXTURE_TEST_CASE(a_group_is_one_target_over_its_members_kept_by_endpoint, set_fixture) {
  peer p1;
  peer p2;
  peer p3;
  const auto table = [](const std::vector<gatewayd::net::endpoint>& at) {
    std::string text = "[consumers.g]\nendpoints = [";
    for (std::size_t i = 0; i < at.size(); ++i)
      text += (i ? ", \"" : "\"") + at[i].to_string() + "\"";
    text += "]\n[[routes]]\nmatch = \"g.>\"\nto = [\"g\"]\n";
    auto r = gatewayd::config::parse_routes_config(text, "routes.toml");
    BOOST_TEST_REQUIRE(r.errors.empty());
    return *r.config;
  };
  apply(table({p1.address(), p2.address()}));
  auto r1 = p1.accept(5s);
  auto r2 = p2.accept(5s);
  BOOST_REQUIRE(r1);
  BOOST_REQUIRE(r2);
  auto s = snapshot();
  BOOST_TEST_REQUIRE(s->targets.size() == 1u);
  BOOST_TEST_REQUIRE(s->targets[0].group != nullptr);
  BOOST_TEST(s->consumers.size() == 2u);
  BOOST_TEST(names(s->consumers) == (std::vector<std::string>{"g", "g"}));
  BOOST_TEST(s->consumers[0]->member() == p1.address().to_string());
  BOOST_TEST(s->consumers[1]->member() == p2.address().to_string());
  BOOST_TEST(routed(*s, "g.x") == std::vector<std::string>{"g"});
  const auto kept = s->consumers[1];

  apply(table({p2.address(), p3.address()}));
  auto r3 = p3.accept(5s);
  BOOST_REQUIRE(r3);
  s = snapshot();
  BOOST_TEST_REQUIRE(s->targets.size() == 1u);
  BOOST_TEST_REQUIRE(s->groups.size() == 1u);
  BOOST_TEST(s->consumers.size() == 2u);
  BOOST_TEST(s->consumers[0] == kept);  // the same member, queue and connection
  BOOST_TEST(s->consumers[1]->member() == p3.address().to_string());
  BOOST_TEST(s->groups[0]->members().size() == 2u);
  BOOST_TEST(s->groups[0]->members()[0] == kept);
  // The removed member is exported beside them until it has drained.
  BOOST_TEST_REQUIRE(s->retired.size() == 1u);
  BOOST_TEST(s->retired[0]->member() == p1.address().to_string());
  BOOST_TEST(set.size() == 2u);
  BOOST_TEST(close_consumer(*s->retired[0], 1s, gc::drop_reason::removed) == 0u);
  on_control([] {});
  BOOST_TEST(drain(1s) == 0u);
}
