// The connection cap's choice, against real sessions over loopback sockets paused by a real
// backpressure consumer: the registry gives up the session paused longest behind a consumer
// (not the oldest connection), never one the gateway's own stop holds or one reading, never the
// same one twice, and counts its place as free at once, before its close has run.
#define BOOST_TEST_MODULE session_registry
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

// Connections in their handshake (TLS, PROXY header) hold no place; at their own cap the oldest
// still in its handshake is evicted for a new one, once; one whose handshake ended is not.
BOOST_AUTO_TEST_CASE(the_oldest_handshake_is_evicted_at_the_handshake_cap) {
  su::session_registry registry;
  registry.limit(1, 2);
  std::vector<int> evicted;
  const auto a = registry.begin_handshake([&] { evicted.push_back(1); });
  const auto b = registry.begin_handshake([&] { evicted.push_back(2); });
  registry.end_handshake(a);  // done: it leaves the list, and is never evicted
  const auto c = registry.begin_handshake([&] { evicted.push_back(3); });
  BOOST_TEST(evicted.empty());
  BOOST_TEST(registry.handshaking() == 2u);
  registry.begin_handshake([&] { evicted.push_back(4); });  // the cap: `b` is the oldest
  BOOST_TEST(evicted == std::vector<int>{2});
  registry.end_handshake(b);  // evicted already: nothing to do
  BOOST_TEST(registry.handshaking() == 2u);
  registry.end_handshake(c);
  BOOST_TEST(registry.handshaking() == 1u);
  BOOST_TEST(registry.places_taken() == 0u);  // handshakes hold no place
}
