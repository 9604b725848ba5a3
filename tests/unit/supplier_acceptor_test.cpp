// supplier_acceptor on a real loopback listener: what it promises the gateway. Every accepted
// connection becomes a session that routes its frames and is counted; max_connections refuses
// the one beyond it (a PROXY header still being read holds none, and the oldest of them gives
// way at the cap on handshakes); the allow list is
// applied to the supplier a PROXY header names, not to the balancer; a bad or missing header
// closes that connection only, counted; stop() closes the listener and cancels pending headers.
#include <boost/test/unit_test.hpp>

#include "net/cidr_block.hpp"
#include "suppliers/session_registry.hpp"
#include "suppliers/supplier_acceptor.hpp"
#include "tests/support/proxy_v2.hpp"
#include "tests/support/supplier_side.hpp"

using namespace gatewayd::test;

namespace {

su::supplier_acceptor::admission blocks(const std::vector<std::string>& cidrs) {
  std::vector<gatewayd::net::cidr_block> b;
  for (const auto& c : cidrs)
    b.push_back(gatewayd::net::parse_cidr(c).value());
  return su::supplier_acceptor::from_blocks(std::move(b));
}

// The gateway's side (tests/support/supplier_side.hpp) with the acceptor under test listening
// on 127.0.0.1 (an ephemeral port).
struct gateway_side : supplier_side {
  std::shared_ptr<su::supplier_acceptor> acceptor;

  gateway_side(asio::io_context& ioc, const std::shared_ptr<gc::consumer>& c,
               std::size_t max_connections, su::supplier_acceptor::admission allow = {},
               su::supplier_acceptor::proxy_options proxy = {}, std::size_t max_handshakes = 256)
      : supplier_side(c) {
    acceptor = std::make_shared<su::supplier_acceptor>(
        gatewayd::runtime::make_executor(ioc), gatewayd::net::endpoint{"127.0.0.1", 0}, ctx,
        max_connections, std::move(allow), std::move(proxy), max_handshakes);
    acceptor->start();
  }
  // The acceptor stopped and every session asked to stop; supplier_side waits until they are
  // gone.
  ~gateway_side() {
    acceptor->stop();
    registry.for_each([](su::supplier_session& s) { s.stop(); });
  }
  std::vector<std::string> peers() const {
    std::vector<std::string> out;
    registry.for_each([&](su::supplier_session& s) { out.push_back(s.peer()); });
    return out;
  }
};

// A supplier's end, written and read with blocking calls.
struct client {
  asio::io_context io;  // never run
  tcp::socket sock{io};

  explicit client(const gateway_side& gw) { sock.connect(gw.acceptor->local_endpoint()); }
  void send(std::string_view bytes) { asio::write(sock, asio::buffer(bytes)); }
  bool closed_by_gateway(std::chrono::milliseconds timeout) {
    return gatewayd::test::closed_by_gateway(sock, timeout);
  }
};

std::string frame(std::size_t seq) {
  return gs::encode_frame("t.x", gatewayd::traffic::numbered_payload(0, seq, 64));
}

}  // namespace

BOOST_FIXTURE_TEST_CASE(each_connection_becomes_a_session_that_routes, io_fixture) {
  peer p;
  auto c = make(spec(p.address(), 1000, gc::overflow_policy::backpressure));
  auto r = p.accept(2s);
  BOOST_TEST_REQUIRE(r.has_value());
  {
    gateway_side gw(ioc, c, 10);
    BOOST_TEST(gw.acceptor->local_endpoint().address().to_string() == "127.0.0.1");
    BOOST_TEST(gw.acceptor->local_endpoint().port() != 0);
    // Three suppliers at once, frames interleaved: each connection is a session of its own.
    client a(gw), b(gw), d(gw);
    BOOST_TEST_REQUIRE(wait_until([&] { return gw.registry.size() == 3; }, 3s));
    a.send(frame(0));
    BOOST_TEST_REQUIRE(r->wait_frames(1, 3s));
    b.send(frame(1));
    BOOST_TEST_REQUIRE(r->wait_frames(2, 3s));
    d.send(frame(2));
    BOOST_TEST_REQUIRE(r->wait_frames(3, 3s));
    BOOST_TEST(r->seqs() == (std::vector<std::size_t>{0, 1, 2}), boost::test_tools::per_element());
    BOOST_TEST(gw.stats.accepted.load() == 3u);
    BOOST_TEST(gw.stats.frames_received.load() == 3u);
    // Not behind a balancer: the session names the socket's own peer.
    for (const auto& name : gw.peers())
      BOOST_TEST(name.rfind("127.0.0.1:", 0) == 0u, name);
    // A supplier that leaves takes its session with it.
    a.sock.close();
    BOOST_TEST(wait_until([&] { return gw.registry.size() == 2; }, 3s));
  }
  close_consumer(*c, 1s);
}

BOOST_FIXTURE_TEST_CASE(the_connection_beyond_the_cap_is_refused_and_counted, io_fixture) {
  peer p;
  auto c = make(spec(p.address(), 1000, gc::overflow_policy::backpressure));
  auto r = p.accept(2s);
  BOOST_TEST_REQUIRE(r.has_value());
  {
    gateway_side gw(ioc, c, 2);
    auto a = std::make_unique<client>(gw);
    client b(gw);
    BOOST_TEST_REQUIRE(wait_until([&] { return gw.registry.size() == 2; }, 3s));
    client refused(gw);
    BOOST_TEST(refused.closed_by_gateway(3s));
    BOOST_TEST(gw.closed(su::close_reason::connection_limit) == 1u);
    BOOST_TEST(gw.stats.accepted.load() == 2u);
    BOOST_TEST(gw.registry.size() == 2u);
    // The two admitted still route: a refusal touches nobody else.
    b.send(frame(0));
    BOOST_TEST_REQUIRE(r->wait_frames(1, 3s));
    // A place freed is a place for the next supplier.
    a.reset();
    BOOST_TEST_REQUIRE(wait_until([&] { return gw.registry.size() == 1; }, 3s));
    client next(gw);
    BOOST_TEST_REQUIRE(wait_until([&] { return gw.stats.accepted.load() == 3; }, 3s));
    next.send(frame(1));
    BOOST_TEST_REQUIRE(r->wait_frames(2, 3s));
    BOOST_TEST(gw.closed(su::close_reason::connection_limit) == 1u);
  }
  close_consumer(*c, 1s);
}

BOOST_FIXTURE_TEST_CASE(a_source_off_the_allow_list_is_refused_and_counted, io_fixture) {
  peer p;
  auto c = make(spec(p.address(), 1000, gc::overflow_policy::backpressure));
  auto r = p.accept(2s);
  BOOST_TEST_REQUIRE(r.has_value());
  {
    gateway_side gw(ioc, c, 10, blocks({"10.0.0.0/8"}));
    client refused(gw);
    BOOST_TEST(refused.closed_by_gateway(3s));
    BOOST_TEST(gw.closed(su::close_reason::not_allowed) == 1u);
    BOOST_TEST(gw.stats.accepted.load() == 0u);
  }
  {
    gateway_side gw(ioc, c, 10, blocks({"10.0.0.0/8", "127.0.0.1/32"}));
    client admitted(gw);
    admitted.send(frame(0));
    BOOST_TEST_REQUIRE(r->wait_frames(1, 3s));
    BOOST_TEST(gw.closed(su::close_reason::not_allowed) == 0u);
    BOOST_TEST(gw.stats.accepted.load() == 1u);
  }
  close_consumer(*c, 1s);
}

BOOST_FIXTURE_TEST_CASE(a_balancer_names_the_supplier_the_allow_list_judges, io_fixture) {
  peer p;
  auto c = make(spec(p.address(), 1000, gc::overflow_policy::backpressure));
  auto r = p.accept(2s);
  BOOST_TEST_REQUIRE(r.has_value());
  {
    // 127.0.0.1 is the balancer; it is not on the allow list, its suppliers in 192.0.2.0/24 are.
    gateway_side gw(ioc, c, 10, blocks({"192.0.2.0/24"}), {blocks({"127.0.0.1/32"}), 3000ms});
    client allowed(gw);
    allowed.send(proxy_v2("192.0.2.7", 4242) + frame(0));
    BOOST_TEST_REQUIRE(r->wait_frames(1, 3s));
    BOOST_TEST(gw.peers() == std::vector<std::string>{"192.0.2.7:4242"},
               boost::test_tools::per_element());
    client other(gw);
    other.send(proxy_v2("198.51.100.1", 5000));
    BOOST_TEST(other.closed_by_gateway(3s));
    BOOST_TEST(gw.closed(su::close_reason::not_allowed) == 1u);
    BOOST_TEST(gw.stats.accepted.load() == 1u);
    // LOCAL (a health check): the balancer speaks for itself, and it is not allowed.
    client health(gw);
    health.send(proxy_v2_local());
    BOOST_TEST(health.closed_by_gateway(3s));
    BOOST_TEST(gw.closed(su::close_reason::not_allowed) == 2u);
  }
  close_consumer(*c, 1s);
}

BOOST_FIXTURE_TEST_CASE(a_bad_or_missing_proxy_header_closes_that_connection_only, io_fixture) {
  peer p;
  auto c = make(spec(p.address(), 1000, gc::overflow_policy::backpressure));
  auto r = p.accept(2s);
  BOOST_TEST_REQUIRE(r.has_value());
  {
    gateway_side gw(ioc, c, 10, {}, {blocks({"127.0.0.1/32"}), 300ms});
    client good(gw);
    good.send(proxy_v2("192.0.2.7", 4242));
    BOOST_TEST_REQUIRE(wait_until([&] { return gw.registry.size() == 1; }, 3s));
    // A supplier that does not know it sits behind a balancer: a frame where the header belongs.
    client plain(gw);
    plain.send(frame(0));
    BOOST_TEST(plain.closed_by_gateway(3s));
    BOOST_TEST(gw.closed(su::close_reason::proxy_header) == 1u);
    // Nothing at all: closed once the header's time is up.
    client silent(gw);
    BOOST_TEST(silent.closed_by_gateway(5s));
    BOOST_TEST(gw.closed(su::close_reason::proxy_header) == 2u);
    BOOST_TEST(gw.stats.accepted.load() == 1u);
    good.send(frame(1));
    BOOST_TEST_REQUIRE(r->wait_frames(1, 3s));
    BOOST_TEST(r->seqs() == std::vector<std::size_t>{1}, boost::test_tools::per_element());
  }
  close_consumer(*c, 1s);
}

// A connection whose header is still being read holds no place under the cap (it cannot keep a
// supplier out), only a slot under the cap on handshakes, where a new one evicts the oldest.
BOOST_FIXTURE_TEST_CASE(a_header_being_read_holds_no_place_and_the_oldest_gives_way, io_fixture) {
  peer p;
  auto c = make(spec(p.address(), 1000, gc::overflow_policy::backpressure));
  auto r = p.accept(2s);
  BOOST_TEST_REQUIRE(r.has_value());
  {
    gateway_side gw(ioc, c, 1, {}, {blocks({"127.0.0.1/32"}), 30000ms}, 2);
    client oldest(gw);  // connected, sends no header
    BOOST_TEST_REQUIRE(wait_until([&] { return gw.registry.handshaking() == 1; }, 3s));
    client stalled(gw);
    BOOST_TEST_REQUIRE(wait_until([&] { return gw.registry.handshaking() == 2; }, 3s));
    // A third at the cap of two handshakes: the oldest gives its slot up.
    client third(gw);
    BOOST_TEST(oldest.closed_by_gateway(3s));
    BOOST_TEST(
        wait_until([&] { return gw.closed(su::close_reason::handshake_evicted) == 1u; }, 3s));
    BOOST_TEST(gw.closed(su::close_reason::proxy_header) == 0u);
    // A header arrives: its supplier takes the one place, which no handshake held.
    stalled.send(proxy_v2("192.0.2.7", 4242) + frame(0));
    BOOST_TEST_REQUIRE(r->wait_frames(1, 3s));
    BOOST_TEST(gw.stats.accepted.load() == 1u);
    BOOST_TEST(gw.closed(su::close_reason::connection_limit) == 0u);
    // The cap is full now: the third's header comes, and it is refused.
    third.send(proxy_v2("192.0.2.8", 4242) + frame(1));
    BOOST_TEST(third.closed_by_gateway(3s));
    BOOST_TEST(gw.closed(su::close_reason::connection_limit) == 1u);
    BOOST_TEST(gw.registry.handshaking() == 0u);
  }
  close_consumer(*c, 1s);
}

BOOST_FIXTURE_TEST_CASE(stop_closes_the_listener_and_cancels_pending_headers, io_fixture) {
  peer p;
  auto c = make(spec(p.address(), 1000, gc::overflow_policy::backpressure));
  auto r = p.accept(2s);
  BOOST_TEST_REQUIRE(r.has_value());
  {
    // A header allowed 30 s: only stop() can end its wait within the test's bounds. The
    // registry's count of handshakes shows the acceptor holds the pending connection (not the
    // listen backlog, whose connections any close of the listener resets).
    gateway_side gw(ioc, c, 1, {}, {blocks({"127.0.0.1/32"}), 30000ms});
    const auto at = gw.acceptor->local_endpoint();
    client pending(gw);
    BOOST_TEST_REQUIRE(wait_until([&] { return gw.registry.handshaking() == 1; }, 3s));
    gw.acceptor->stop();
    BOOST_TEST(pending.closed_by_gateway(3s));
    // Nothing listens at the address any more: a connect is refused.
    BOOST_TEST(wait_until(
        [&] {
          asio::io_context io;
          tcp::socket s(io);
          std::error_code ec;
          s.connect(at, ec);
          return ec == asio::error::connection_refused;
        },
        3s));
    BOOST_TEST(gw.stats.accepted.load() == 0u);
    BOOST_TEST(gw.closed(su::close_reason::proxy_header) == 0u);
    BOOST_TEST(gw.registry.handshaking() == 0u);
  }
  close_consumer(*c, 1s);
}
