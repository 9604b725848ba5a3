// supplier_session on real accepted loopback sockets, routing to real consumers whose peers
// parse every byte: its states seen from outside. Frames are routed in order; an idle
// connection is closed; a protocol error closes that session only; a full backpressure consumer
// pauses it and resumes it once drained; a close mid-frame counts the partial frame.
#include <boost/test/unit_test.hpp>

#include "tests/support/supplier_side.hpp"

using namespace gatewayd::test;

namespace {

// The gateway's side (tests/support/supplier_side.hpp) and a listening socket the supplier
// connections are accepted from.
struct gateway_side : supplier_side {
  tcp::acceptor acceptor;

  gateway_side(asio::io_context& ioc, const std::shared_ptr<gc::consumer>& c,
               std::chrono::milliseconds idle_timeout = 0ms)
      : supplier_side(c, idle_timeout),
        acceptor(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {}
};

// One supplier connection: the session on the fixture's io_context over the accepted socket,
// and the supplier's end, written to with blocking calls.
struct connection {
  asio::io_context client_io;  // never run
  tcp::socket client{client_io};
  std::shared_ptr<su::supplier_session> session;

  connection(asio::io_context& ioc, gateway_side& gw) {
    client.connect(gw.acceptor.local_endpoint());
    tcp::socket accepted(gatewayd::runtime::make_strand(gatewayd::runtime::make_executor(ioc)));
    gw.acceptor.accept(accepted);
    session = std::make_shared<su::supplier_session>(std::move(accepted), gw.ctx);
    session->start();
  }
  ~connection() {
    if (session) session->stop();
  }
  void send(std::string_view bytes) { asio::write(client, asio::buffer(bytes)); }
  bool closed_by_gateway(std::chrono::milliseconds timeout) {
    return gatewayd::test::closed_by_gateway(client, timeout);
  }
};

// Frame `seq` to "t.x", numbered as the receiver's seq_of() reads it.
std::string frame(std::size_t seq, std::size_t payload = 100) {
  return gs::encode_frame("t.x", gatewayd::traffic::numbered_payload(0, seq, payload));
}

std::vector<std::size_t> zero_to(std::size_t n) {
  std::vector<std::size_t> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = i;
  return v;
}

}  // namespace

BOOST_FIXTURE_TEST_CASE(frames_are_routed_in_order, io_fixture) {
  peer p;
  auto c = make(spec(p.address(), 100000, gc::overflow_policy::backpressure));
  auto r = p.accept(2s);
  BOOST_TEST_REQUIRE(r.has_value());
  gateway_side gw(ioc, c);
  {
    connection s(ioc, gw);
    // Frames of varying sizes in writes that cut them anywhere: a frame's head in one read and
    // its tail in the next must be routed whole, after the ones before it.
    std::string bytes;
    for (std::size_t i = 0; i < 300; ++i)
      bytes += frame(i, 10 + (i * 131) % 3000);
    for (std::size_t at = 0; at < bytes.size(); at += 7919)
      s.send(std::string_view(bytes).substr(at, 7919));
    BOOST_TEST_REQUIRE(r->wait_frames(300, 5s));
    BOOST_TEST(r->seqs() == zero_to(300), boost::test_tools::per_element());
    for (std::size_t i = 0; i < 300; ++i)
      BOOST_TEST(r->frames()[i] == frame(i, 10 + (i * 131) % 3000));
    BOOST_TEST(gw.stats.frames_received.load() == 300u);
    BOOST_TEST(s.session->stats().frames.load() == 300u);
    // The pass counts its bytes after its flush, and the consumer may have written them first.
    BOOST_TEST(wait_until([&] { return gw.stats.bytes_received.load() == bytes.size(); }, 2s),
               gw.stats.bytes_received.load() << " of " << bytes.size() << " bytes counted");
  }
  close_consumer(*c, 1s);
  BOOST_TEST(wait_until([&] { return gw.registry.size() == 0; }, 3s));
}

BOOST_FIXTURE_TEST_CASE(an_idle_connection_is_closed_and_its_partial_frame_counted, io_fixture) {
  peer p;
  auto c = make(spec(p.address(), 100000, gc::overflow_policy::backpressure));
  auto r = p.accept(2s);
  BOOST_TEST_REQUIRE(r.has_value());
  gateway_side gw(ioc, c, 150ms);
  {
    connection s(ioc, gw);
    // One whole frame, then the head of another that never ends: a trickle is idle too.
    const std::string next = frame(1);
    s.send(frame(0) + next.substr(0, 20));
    BOOST_TEST_REQUIRE(r->wait_frames(1, 3s));
    BOOST_TEST(s.closed_by_gateway(5s));
    BOOST_TEST(wait_until([&] { return gw.closed(su::close_reason::idle_timeout) == 1u; }, 3s));
    // Counted as the close ends, after the socket's: waited for, not raced.
    // The bytes are counted last: once they are in, so is the frame.
    BOOST_TEST_REQUIRE(
        wait_until([&] { return gw.partial_bytes(su::partial_discard::idle_timeout) != 0u; }, 3s));
    BOOST_TEST(gw.partial_bytes(su::partial_discard::idle_timeout) == 20u);
    BOOST_TEST(gw.partial_frames(su::partial_discard::idle_timeout) == 1u);
    BOOST_TEST(gw.stats.frames_received.load() == 1u);
  }
  close_consumer(*c, 1s);
  BOOST_TEST(wait_until([&] { return gw.registry.size() == 0; }, 3s));
}

BOOST_FIXTURE_TEST_CASE(a_protocol_error_closes_only_its_own_session, io_fixture) {
  peer p;
  auto c = make(spec(p.address(), 100000, gc::overflow_policy::backpressure));
  auto r = p.accept(2s);
  BOOST_TEST_REQUIRE(r.has_value());
  gateway_side gw(ioc, c);
  {
    connection bad(ioc, gw);
    connection good(ioc, gw);
    good.send(frame(0));
    BOOST_TEST_REQUIRE(r->wait_frames(1, 3s));
    // The whole frame before the garbage is still routed; then the connection is closed.
    bad.send(frame(1) + "GARBAGE GARBAGE GARBAGE GARBAGE");
    BOOST_TEST(bad.closed_by_gateway(3s));
    BOOST_TEST(wait_until(
        [&] {
          return gw.stats.protocol_errors[static_cast<std::size_t>(gs::frame_error::bad_magic)]
                     .load() == 1u;
        },
        3s));
    // The other session reads on.
    good.send(frame(2));
    BOOST_TEST_REQUIRE(r->wait_frames(3, 3s));
    BOOST_TEST(r->seqs() == zero_to(3), boost::test_tools::per_element());
    BOOST_TEST(!good.closed_by_gateway(50ms));
    BOOST_TEST(gw.partial_frames(su::partial_discard::peer_closed) == 0u);
  }
  close_consumer(*c, 1s);
  BOOST_TEST(wait_until([&] { return gw.registry.size() == 0; }, 3s));
}

BOOST_FIXTURE_TEST_CASE(a_full_consumer_pauses_the_session_until_it_drains, io_fixture) {
  // A backpressure consumer of one frame whose peer is not there yet: full at once.
  const auto at = unused_endpoint();
  auto c = make(spec(at, 1, gc::overflow_policy::backpressure));
  gateway_side gw(ioc, c);
  {
    connection s(ioc, gw);
    // 8 KB frames, queued as they lie (not copied into chunks of the consumer's own).
    s.send(frame(0, 8000) + frame(1, 8000));
    BOOST_TEST_REQUIRE(wait_until([&] { return s.session->paused(); }, 3s));
    BOOST_TEST(gw.stats.backpressure_pauses.load() >= 1u);
    // Paused, it reads nothing more: these stay in the socket until the consumer drains.
    for (std::size_t i = 2; i < 10; ++i)
      s.send(frame(i, 8000));
    BOOST_TEST(!wait_until([&] { return gw.stats.frames_received.load() > 2u; }, 100ms));
    BOOST_TEST(s.session->paused());

    // The consumer's peer comes: the queue drains, the session resumes and reads the rest.
    peer late(at.port);
    auto r = late.accept(5s);
    BOOST_TEST_REQUIRE(r.has_value());
    BOOST_TEST_REQUIRE(r->wait_frames(10, 5s));
    BOOST_TEST(r->seqs() == zero_to(10), boost::test_tools::per_element());
    BOOST_TEST(gw.stats.frames_received.load() == 10u);
    BOOST_TEST(wait_until([&] { return !s.session->paused(); }, 3s));
    // Reading again: a frame sent now is routed.
    s.send(frame(10, 8000));
    BOOST_TEST(r->wait_frames(11, 3s));
    close_consumer(*c, 1s);
  }
  BOOST_TEST(wait_until([&] { return gw.registry.size() == 0; }, 3s));
}

BOOST_FIXTURE_TEST_CASE(a_peer_that_leaves_while_paused_is_read_to_its_end, io_fixture) {
  // A backpressure consumer that never connects: full after one frame, it never resumes anyone.
  auto c = make(spec(unused_endpoint(), 1, gc::overflow_policy::backpressure));
  gateway_side gw(ioc, c);
  {
    connection s(ioc, gw);
    s.send(frame(0, 8000) + frame(1, 8000));
    BOOST_TEST_REQUIRE(wait_until([&] { return s.session->paused(); }, 3s));
    // It leaves while the session is paused: only the pause check can notice. What it sent
    // before its FIN is read and routed (queued past the consumer's limit), then it is closed.
    s.send(frame(2, 8000) + frame(3, 8000) + frame(4, 8000));
    s.client.shutdown(tcp::socket::shutdown_send);
    BOOST_TEST(wait_until([&] { return gw.stats.frames_received.load() == 5u; }, 5s));
    BOOST_TEST(wait_until([&] { return c->stats().queued_frames.load() == 5u; }, 3s));
    BOOST_TEST(s.closed_by_gateway(3s));
    BOOST_TEST(!s.session->paused());
  }
  close_consumer(*c, 100ms);
}

BOOST_FIXTURE_TEST_CASE(a_close_mid_frame_counts_the_partial_frame, io_fixture) {
  peer p;
  auto c = make(spec(p.address(), 100000, gc::overflow_policy::backpressure));
  auto r = p.accept(2s);
  BOOST_TEST_REQUIRE(r.has_value());
  gateway_side gw(ioc, c);
  {
    connection s(ioc, gw);
    const std::string next = frame(1, 500);
    s.send(frame(0) + next.substr(0, 123));
    BOOST_TEST_REQUIRE(r->wait_frames(1, 3s));
    s.client.close();
    // The bytes are counted last: once they are in, so is the frame.
    BOOST_TEST_REQUIRE(
        wait_until([&] { return gw.partial_bytes(su::partial_discard::peer_closed) != 0u; }, 3s));
    BOOST_TEST(gw.partial_bytes(su::partial_discard::peer_closed) == 123u);
    BOOST_TEST(gw.partial_frames(su::partial_discard::peer_closed) == 1u);
    BOOST_TEST(gw.stats.frames_received.load() == 1u);
    BOOST_TEST(r->frames().size() == 1u);
    // Closed by its peer: not counted as closed by the gateway.
    for (std::size_t i = 0; i < su::close_reason_count; ++i)
      BOOST_TEST(gw.stats.closed[i].load() == 0u);
  }
  close_consumer(*c, 1s);
  BOOST_TEST(wait_until([&] { return gw.registry.size() == 0; }, 3s));
}
