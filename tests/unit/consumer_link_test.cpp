// consumer_link against real loopback peers: it dials and says so, redials (with backoff) an
// endpoint where nothing listens yet and one whose peer left, and moves to a new endpoint.
#include <boost/test/unit_test.hpp>

#include "consumers/consumer_link.hpp"
#include "tests/support/consumer_harness.hpp"

using namespace gatewayd::test;

namespace {

// A link on one io thread; what it tells its consumer is counted.
struct link_fixture : gc::link_events {
  asio::io_context ioc;
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(ioc);
  gatewayd::runtime::strand strand =
      gatewayd::runtime::make_strand(gatewayd::runtime::make_executor(ioc));
  const std::string name = "link";
  gc::consumer_stats stats;
  gc::consumer_link link{strand, name, stats, gc::backoff(20ms, 100ms), {}, *this};
  std::shared_ptr<int> owner = std::make_shared<int>(0);
  std::atomic<int> ups{0};
  std::atomic<int> downs{0};
  std::atomic<std::uint64_t> last_conn{0};
  std::thread io{[this] { ioc.run(); }};

  void on_link_up(std::uint64_t conn) override {
    last_conn = conn;
    ++ups;
  }
  void on_link_down() override { ++downs; }
  std::shared_ptr<void> keep_alive() override { return owner; }

  template <class F>
  void on_strand(F f) {
    std::promise<void> done;
    asio::post(strand, [&] {
      f();
      done.set_value();
    });
    done.get_future().wait();
  }

  ~link_fixture() {
    on_strand([&] { link.shut(); });
    work.reset();
    io.join();
  }
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(dials_and_reports_the_connection_up, link_fixture) {
  peer p;
  on_strand([&] { link.start(p.address(), std::nullopt); });
  auto r = p.accept(2s);
  BOOST_REQUIRE(r);
  BOOST_REQUIRE(wait_until([&] { return ups.load() == 1; }, 2s));
  BOOST_TEST(stats.connected.load());
  bool up = false;
  on_strand([&] { up = link.up(last_conn.load()); });
  BOOST_TEST(up);
  BOOST_TEST(downs.load() == 0);
}

BOOST_FIXTURE_TEST_CASE(redials_until_something_listens, link_fixture) {
  const auto at = unused_endpoint();
  on_strand([&] { link.start(at, std::nullopt); });
  // Refused at least twice: it goes on dialing after a failure.
  BOOST_REQUIRE(wait_until(
      [&] {
        return stats.connect_failures[static_cast<std::size_t>(gc::connect_failure::refused)]
                   .load() >= 2;
      },
      5s));
  BOOST_TEST(ups.load() == 0);
  peer p(at.port);
  BOOST_REQUIRE(p.accept(5s));
  BOOST_TEST(wait_until([&] { return ups.load() == 1; }, 2s));
}

BOOST_FIXTURE_TEST_CASE(redials_when_the_peer_leaves, link_fixture) {
  peer p;
  on_strand([&] { link.start(p.address(), std::nullopt); });
  auto first = p.accept(2s);
  BOOST_REQUIRE(first);
  BOOST_REQUIRE(wait_until([&] { return ups.load() == 1; }, 2s));
  const std::uint64_t conn = last_conn.load();
  first->close();
  BOOST_REQUIRE(wait_until([&] { return downs.load() == 1; }, 5s));
  auto second = p.accept(5s);
  BOOST_REQUIRE(second);
  BOOST_REQUIRE(wait_until([&] { return ups.load() == 2; }, 2s));
  BOOST_TEST(last_conn.load() != conn);  // a new connection id: writes for the old one are stale
  BOOST_TEST(stats.reconnects.load() == 1u);
  BOOST_TEST(
      stats.disconnects[static_cast<std::size_t>(gc::disconnect_reason::peer_closed)].load() == 1u);
}

BOOST_FIXTURE_TEST_CASE(moves_to_a_new_endpoint, link_fixture) {
  peer old_peer;
  peer new_peer;
  on_strand([&] { link.start(old_peer.address(), std::nullopt); });
  auto r = old_peer.accept(2s);
  BOOST_REQUIRE(r);
  BOOST_REQUIRE(wait_until([&] { return ups.load() == 1; }, 2s));
  on_strand([&] { link.move_to(new_peer.address(), std::nullopt); });
  BOOST_TEST(downs.load() == 1);  // the old connection went down before the move returned
  BOOST_TEST(r->wait_eof(2s));
  BOOST_REQUIRE(new_peer.accept(2s));
  BOOST_REQUIRE(wait_until([&] { return ups.load() == 2; }, 2s));
  BOOST_TEST(
      stats.disconnects[static_cast<std::size_t>(gc::disconnect_reason::endpoint_changed)].load() ==
      1u);
}
