// The sending side of gateway-peer's failover (tools/traffic/supplier_link) against a fake
// gateway on real loopback sockets: a gateway that stops (half-closes and reads on) is told from
// one that is gone (closed, and resets what was written after).
#include <boost/test/unit_test.hpp>

#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>

#include "tests/support/test_peers.hpp"
#include "tools/traffic/sockets.hpp"
#include "tools/traffic/supplier_link.hpp"

using namespace gatewayd::traffic;
using namespace std::chrono_literals;
using gatewayd::test::eventually;

namespace {

// A listener and the one connection the link makes to it (plain blocking sockets).
struct fake_gateway {
  int listener = -1;
  int conn = -1;

  fake_gateway() {
    std::error_code ec;
    listener = listen_on(loopback(0), ec);
    BOOST_TEST_REQUIRE(listener >= 0, ec.message());
  }
  ~fake_gateway() {
    if (conn >= 0) ::close(conn);
    ::close(listener);
  }
  void accept_one() {
    conn = ::accept(listener, nullptr, nullptr);
    BOOST_TEST_REQUIRE(conn >= 0);
  }
  // Reads exactly `n` bytes.
  std::string read_exactly(std::size_t n) {
    std::string got(n, '\0');
    std::size_t at = 0;
    while (at < n) {
      const ssize_t r = ::recv(conn, got.data() + at, n - at, 0);
      BOOST_TEST_REQUIRE(r > 0);
      at += static_cast<std::size_t>(r);
    }
    return got;
  }
  // Reads until end-of-file.
  std::string read_to_end() {
    std::string got;
    char buf[4096];
    for (ssize_t r; (r = ::recv(conn, buf, sizeof buf, 0)) > 0;)
      got.append(buf, static_cast<std::size_t>(r));
    return got;
  }
  // Bytes received and not read yet.
  int unread() const {
    int n = -1;
    return ::ioctl(conn, FIONREAD, &n) == 0 ? n : -1;
  }
  void close_conn() {
    ::close(conn);
    conn = -1;
  }
};

const std::atomic<bool> no_stop{false};

}  // namespace

// gatewayd's lame-duck stop: it half-closes and reads what the supplier still sends until the
// supplier closes its side too.
BOOST_AUTO_TEST_CASE(a_stopping_gateway_asks_to_leave_and_reads_everything) {
  fake_gateway gw;
  supplier_link link({loopback(local_port(gw.listener))});
  std::error_code ec;
  BOOST_TEST_REQUIRE(link.connect(ec), ec.message());
  gw.accept_one();
  BOOST_TEST_REQUIRE(link.send("before", no_stop, ec), ec.message());
  BOOST_TEST(!link.asked_to_leave());
  ::shutdown(gw.conn, SHUT_WR);
  BOOST_TEST_REQUIRE(eventually([&] { return link.asked_to_leave(); }, 5s));
  BOOST_TEST(!link.gone());
  BOOST_TEST(link.leave());
  BOOST_TEST(gw.read_to_end() == "before");
}

// A gateway that read everything and then died (its kernel sends an end-of-file, as a stop
// does) while the supplier wrote on: what was written after is reset, and must not pass for a
// stop, whichever the supplier sees first.
BOOST_AUTO_TEST_CASE(a_gateway_that_died_after_reading_everything_is_not_a_stop) {
  fake_gateway gw;
  supplier_link link({loopback(local_port(gw.listener))});
  std::error_code ec;
  BOOST_TEST_REQUIRE(link.connect(ec), ec.message());
  gw.accept_one();
  BOOST_TEST_REQUIRE(link.send("read", no_stop, ec), ec.message());
  BOOST_TEST(gw.read_exactly(4) == "read");
  gw.close_conn();  // nothing unread: an end-of-file, not a reset
  BOOST_TEST_REQUIRE(link.send("written after", no_stop, ec), ec.message());
  bool asked = false;
  BOOST_TEST_REQUIRE(eventually(
      [&] {
        asked = link.asked_to_leave();
        return asked || link.gone();
      },
      5s));
  if (asked) {
    BOOST_TEST_MESSAGE("the end-of-file came before the reset");
    BOOST_TEST(!link.leave(), "a reset after the end-of-file passed for a stop");
  } else {
    BOOST_TEST_MESSAGE("the reset was already there with the end-of-file");
    BOOST_TEST(!link.send("more", no_stop, ec));
  }
}

// A gateway that died with bytes unread: its kernel resets the connection at once.
BOOST_AUTO_TEST_CASE(a_gateway_that_died_with_bytes_unread_fails_the_next_write) {
  fake_gateway gw;
  supplier_link link({loopback(local_port(gw.listener))});
  std::error_code ec;
  BOOST_TEST_REQUIRE(link.connect(ec), ec.message());
  gw.accept_one();
  BOOST_TEST_REQUIRE(link.send("unread", no_stop, ec), ec.message());
  BOOST_TEST_REQUIRE(eventually([&] { return gw.unread() == 6; }, 5s));
  gw.close_conn();
  BOOST_TEST(!link.asked_to_leave());
  BOOST_TEST(eventually([&] { return !link.send("x", no_stop, ec); }, 5s));
}
