// The connection cap's choice, against real sessions over loopback sockets paused by a real
// backpressure consumer: the registry gives up the session paused longest behind a consumer
// (not the oldest connection), never one the gateway's own stop holds or one reading, never the
// same one twice, and counts its place as free at once, before its close has run.
#include <boost/test/unit_test.hpp>

#include "suppliers/session_registry.hpp"
#include "suppliers/supplier_session.hpp"
#include "tests/support/consumer_harness.hpp"
#include "tests/support/routing_rules.hpp"

using namespace gatewayd::test;
namespace su = gatewayd::suppliers;

namespace {

// One supplier connection: the gateway's session on the fixture's io_context, and the
// supplier's end, written to with blocking calls.
struct connection {
  asio::io_context client_io;  // never run
  tcp::socket client{client_io};
  std::shared_ptr<su::supplier_session> session;

  connection(asio::io_context& ioc, tcp::acceptor& acceptor, su::session_context& ctx) {
    client.connect(acceptor.local_endpoint());
    tcp::socket accepted(gatewayd::runtime::make_strand(gatewayd::runtime::make_executor(ioc)));
    acceptor.accept(accepted);
    session = std::make_shared<su::supplier_session>(std::move(accepted), ctx);
    session->start();
  }
  // Two frames for the backpressure consumer (capacity 1): the session pauses after reading them.
  // 8 KB each, so that the consumer queues them as they lie instead of copying them into chunks
  // of its own (frame_packer): those it would hold until it is destroyed, which the io threads'
  // routers (thread-locals holding the table) do only as the threads exit, after their chunk
  // caches are gone.
  void send_frames() {
    std::string bytes;
    for (int i = 0; i < 2; ++i)
      bytes += gs::encode_frame("t.x", gatewayd::traffic::numbered_payload(0, i, 8000));
    asio::write(client, asio::buffer(bytes));
  }
  bool paused_by_consumer() const { return session->paused_by_consumer_since().has_value(); }
  // The gateway closed the connection: the supplier reads end-of-file.
  bool closed_by_gateway(std::chrono::milliseconds timeout) {
    pollfd p{client.native_handle(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
    char c;
    std::error_code ec;
    client.read_some(asio::buffer(&c, 1), ec);
    return ec == asio::error::eof || ec == asio::error::connection_reset;
  }
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(the_session_paused_longest_gives_up_its_place, io_fixture) {
  // A backpressure consumer that never connects: full after one frame, it pauses every session
  // that routes to it.
  auto c = make(spec(unused_endpoint(), 1, gc::overflow_policy::backpressure));
  su::route_snapshot_holder routes;
  {
    auto snap = std::make_shared<su::route_snapshot>();
    snap->table =
        gatewayd::routing::routing_table::build(make_config({c->name()}, {{"t.>", {c->name()}}}));
    snap->consumers.push_back(c);
    routes.publish(std::move(snap));
  }
  su::supplier_stats stats;
  su::session_registry registry;
  su::route_readers readers;
  su::frame_routers routers(readers);
  su::session_context ctx{routes, stats, registry, gs::default_max_payload, 0ms};
  ctx.routers = &routers;
  tcp::acceptor acceptor(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));

  // `older` connects first but is paused last; `longest` is paused first.
  connection older(ioc, acceptor, ctx);
  connection longest(ioc, acceptor, ctx);
  connection later(ioc, acceptor, ctx);
  connection held(ioc, acceptor, ctx);
  connection reading(ioc, acceptor, ctx);
  longest.send_frames();
  BOOST_TEST_REQUIRE(wait_until([&] { return longest.paused_by_consumer(); }, 2s));
  later.send_frames();
  BOOST_TEST_REQUIRE(wait_until([&] { return later.paused_by_consumer(); }, 2s));
  older.send_frames();
  BOOST_TEST_REQUIRE(wait_until([&] { return older.paused_by_consumer(); }, 2s));
  // Held by the gateway's stop (drain): paused, but not by a consumer.
  held.session->pause_reading();
  BOOST_TEST_REQUIRE(wait_until([&] { return held.session->paused(); }, 2s));
  BOOST_TEST(!held.paused_by_consumer());
  BOOST_TEST(!reading.paused_by_consumer());
  BOOST_TEST(
      (*longest.session->paused_by_consumer_since() < *later.session->paused_by_consumer_since()));
  BOOST_TEST(registry.places_taken() == 5u);

  const auto reclaimed = [&] {
    return stats.closed[static_cast<std::size_t>(su::close_reason::reclaimed)].load();
  };
  // The place is free as soon as the session is chosen; its close follows on its strand.
  BOOST_TEST(registry.reclaim_longest_paused());
  BOOST_TEST(registry.places_taken() == 4u);
  BOOST_TEST(longest.closed_by_gateway(2s));
  BOOST_TEST(wait_until([&] { return reclaimed() == 1u; }, 2s));
  longest.session.reset();  // the test's own reference: the session can go
  BOOST_TEST(wait_until([&] { return registry.size() == 4u; }, 2s));
  BOOST_TEST(registry.places_taken() == 4u);  // it has left, and the count of places agrees

  // Chosen together (before either close runs): two different sessions, in pause order.
  BOOST_TEST(registry.reclaim_longest_paused());
  BOOST_TEST(registry.reclaim_longest_paused());
  BOOST_TEST(registry.places_taken() == 2u);
  BOOST_TEST(later.closed_by_gateway(2s));
  BOOST_TEST(older.closed_by_gateway(2s));
  BOOST_TEST(wait_until([&] { return reclaimed() == 3u; }, 2s));

  // Left: one held by the stop and one reading. Neither is given up.
  BOOST_TEST(!registry.reclaim_longest_paused());
  BOOST_TEST(registry.places_taken() == 2u);
  BOOST_TEST(!held.closed_by_gateway(50ms));
  BOOST_TEST(!reading.closed_by_gateway(50ms));
  // What the reclaimed sessions read whole was routed: their frames are in the consumer's queue.
  BOOST_TEST(stats.frames_received.load() == 6u);
  BOOST_TEST(c->stats().queued_frames.load() == 6u);

  close_consumer(*c, 100ms);
  for (auto* s : {&held, &reading})
    s->session->stop();
  for (auto* s : {&older, &later, &held, &reading})
    s->session.reset();
  // Every session gone before the context they share.
  BOOST_TEST(wait_until([&] { return registry.size() == 0; }, 3s));
}

const std::uint64_t here = su::handshake_source_of(asio::ip::make_address("127.0.0.1"));
const std::uint64_t there = su::handshake_source_of(asio::ip::make_address("127.0.0.2"));

// Connections in their handshake (TLS, PROXY header) hold no place; at their own cap the oldest
// still in its handshake is evicted for a new one, once; one whose handshake ended is not.
BOOST_AUTO_TEST_CASE(the_oldest_handshake_is_evicted_at_the_handshake_cap) {
  su::session_registry registry;
  registry.limit(1, 2);
  std::vector<int> evicted;
  const auto a = registry.begin_handshake(here, [&] { evicted.push_back(1); });
  const auto b = registry.begin_handshake(here, [&] { evicted.push_back(2); });
  registry.end_handshake(a);  // done: it leaves the list, and is never evicted
  const auto c = registry.begin_handshake(here, [&] { evicted.push_back(3); });
  BOOST_TEST(evicted.empty());
  BOOST_TEST(registry.handshaking() == 2u);
  registry.begin_handshake(here, [&] { evicted.push_back(4); });  // the cap: `b` is the oldest
  BOOST_TEST(evicted == std::vector<int>{2});
  registry.end_handshake(b);  // evicted already: nothing to do
  BOOST_TEST(registry.handshaking() == 2u);
  registry.end_handshake(c);
  BOOST_TEST(registry.handshaking() == 1u);
  BOOST_TEST(registry.places_taken() == 0u);  // handshakes hold no place
}

// At the cap a connection that has sent nothing takes the slot of the oldest that has sent
// nothing, never one under way (its first bytes arrived), whatever their ages; with every slot
// under way, the newcomer gives way itself. Before, the oldest went, whatever progress it made.
BOOST_AUTO_TEST_CASE(a_handshake_under_way_keeps_its_slot_against_silent_newcomers) {
  su::session_registry registry;
  registry.limit(100, 8);  // a share of 2 slots per source
  std::vector<int> evicted;
  const auto under_way = registry.begin_handshake(here, [&] { evicted.push_back(0); });
  registry.handshake_progressed(under_way);
  std::vector<std::uint64_t> sources{there};
  for (int i = 1; i < 8; ++i)  // seven silent ones, each from a host of its own
    registry.begin_handshake(there + static_cast<std::uint64_t>(i),
                             [&evicted, i] { evicted.push_back(i); });
  for (int i = 8; i < 20; ++i)  // twelve more silent ones, each from another host again
    registry.begin_handshake(there + static_cast<std::uint64_t>(i),
                             [&evicted, i] { evicted.push_back(i); });
  // The oldest silent ones went, in order; the one under way, the oldest of all, stayed.
  BOOST_TEST(evicted == (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
  BOOST_TEST(registry.handshaking() == 8u);
  // Every slot under way (none from a source over its share): the newcomer gives way itself.
  evicted.clear();
  for (int i = 13; i < 20; ++i)
    registry.handshake_progressed(static_cast<std::uint64_t>(i + 1));  // tickets count from 1
  const auto newcomer = registry.begin_handshake(there + 100, [&] { evicted.push_back(100); });
  BOOST_TEST(newcomer == 0u);
  BOOST_TEST(evicted == std::vector<int>{100});
  BOOST_TEST(registry.handshaking() == 8u);
}

// A host holding its share of the slots (a quarter) evicts its own connections, silent ones
// first, then the oldest under way: however many handshakes it starts, another host's handshake
// under way keeps its slot, and so does one of its silent ones while the flooding host is over
// its share.
BOOST_AUTO_TEST_CASE(a_host_over_its_share_evicts_only_its_own_handshakes) {
  su::session_registry registry;
  registry.limit(100, 8);  // share: 2
  std::vector<std::uint64_t> evicted;
  const auto victim_of = [&](std::uint64_t id) {
    return [&evicted, id] { evicted.push_back(id); };
  };
  const auto supplier = registry.begin_handshake(here, victim_of(1000));
  registry.handshake_progressed(supplier);
  const auto bystander = registry.begin_handshake(there + 1, victim_of(2000));  // silent
  // The flood from `there`: each handshake sends its first bytes at once (under way).
  std::vector<std::uint64_t> flood;
  for (std::uint64_t i = 0; i < 50; ++i) {
    const auto t = registry.begin_handshake(there, victim_of(i));
    if (t != 0) registry.handshake_progressed(t);
    flood.push_back(t);
  }
  BOOST_TEST(registry.handshaking() == 8u);
  for (const auto id : evicted)
    BOOST_TEST(id < 50u, "evicted " << id);  // only the flood's own
  BOOST_TEST(evicted.size() == 50u - 6u);    // six of the flood hold slots beside the two
  // A silent newcomer from the flooding host takes its own oldest, not the silent bystander.
  evicted.clear();
  registry.begin_handshake(there, victim_of(99));
  BOOST_TEST(evicted.size() == 1u);
  BOOST_TEST(evicted.front() < 50u);
  registry.end_handshake(supplier);
  registry.end_handshake(bystander);
}

// The share is counted by host: an IPv4 address, an IPv6 /64 (a v4-mapped address is its IPv4
// one).
BOOST_AUTO_TEST_CASE(a_source_is_an_ipv4_address_or_an_ipv6_64) {
  const auto of = [](const char* a) { return su::handshake_source_of(asio::ip::make_address(a)); };
  BOOST_TEST(of("192.0.2.1") != of("192.0.2.2"));
  BOOST_TEST(of("::ffff:192.0.2.1") == of("192.0.2.1"));
  BOOST_TEST(of("2001:db8:1:2::1") == of("2001:db8:1:2:ffff::9"));
  BOOST_TEST(of("2001:db8:1:2::1") != of("2001:db8:1:3::1"));
}
