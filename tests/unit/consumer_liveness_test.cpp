// A consumer connection that cannot make progress ends within its bounds, over real loopback
// sockets: a dial the peer never answers (SYNs dropped by a full accept queue) gives up after
// consumer_connect_timeout_ms, and a peer that stops acknowledging is cut after
// consumer_timeout_ms, with the bytes it never acknowledged counted.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/tcp_liveness.hpp"
#include "tests/support/consumer_harness.hpp"

using namespace gatewayd::test;

namespace {

std::uint64_t disconnects(const gc::consumer& c, gc::disconnect_reason r) {
  return c.stats().disconnects[static_cast<std::size_t>(r)].load();
}

std::uint64_t connect_failures(const gc::consumer& c, gc::connect_failure r) {
  return c.stats().connect_failures[static_cast<std::size_t>(r)].load();
}

int get_int(int fd, int level, int name) {
  int v = -1;
  socklen_t len = sizeof v;
  BOOST_REQUIRE(::getsockopt(fd, level, name, &v, &len) == 0);
  return v;
}

// A listener on 127.0.0.1 whose accept queue is full: the kernel drops every further SYN, so a
// dial to it neither completes nor fails until the client's own SYN retries run out (minutes).
class full_listener {
 public:
  full_listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    BOOST_REQUIRE(fd_ >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOST_REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    BOOST_REQUIRE(::listen(fd_, 0) == 0);  // room for one connection nobody accepts
    socklen_t len = sizeof a;
    BOOST_REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port_ = ntohs(a.sin_port);
    // Dial until one dial hangs: from then on the queue is full.
    for (int i = 0; i < 8; ++i) {
      const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      fillers_.push_back(c);
      (void)::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a);
      pollfd p{c, POLLOUT, 0};
      if (::poll(&p, 1, 200) == 0) return;
    }
    BOOST_FAIL("the accept queue never filled up");
  }
  ~full_listener() {
    for (int c : fillers_)
      ::close(c);
    for (int c : accepted_)
      ::close(c);
    ::close(fd_);
  }
  gatewayd::net::endpoint address() const { return {"127.0.0.1", port_}; }
  // Accepts whatever is queued, keeping it open: the queue has room again.
  void accept_all() {
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) return;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      accepted_.push_back(c);
    }
  }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::vector<int> fillers_;
  std::vector<int> accepted_;
};

}  // namespace

BOOST_AUTO_TEST_CASE(liveness_sets_keepalive_and_user_timeout) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  BOOST_REQUIRE(fd >= 0);
  BOOST_TEST(!gatewayd::net::set_liveness(fd, std::chrono::milliseconds(0)));
  BOOST_TEST(get_int(fd, SOL_SOCKET, SO_KEEPALIVE) == 0);  // 0: the kernel's defaults stay
  BOOST_TEST(get_int(fd, IPPROTO_TCP, TCP_USER_TIMEOUT) == 0);
  BOOST_TEST(!gatewayd::net::set_liveness(fd, std::chrono::milliseconds(30000)));
  BOOST_TEST(get_int(fd, SOL_SOCKET, SO_KEEPALIVE) == 1);
  BOOST_TEST(get_int(fd, IPPROTO_TCP, TCP_USER_TIMEOUT) == 30000);
  BOOST_TEST(get_int(fd, IPPROTO_TCP, TCP_KEEPIDLE) == 15);
  BOOST_TEST(get_int(fd, IPPROTO_TCP, TCP_KEEPINTVL) == 5);
  BOOST_TEST(get_int(fd, IPPROTO_TCP, TCP_KEEPCNT) == 3);
  // Below a second the probes still go out once a second, never every 0 s (EINVAL).
  BOOST_TEST(!gatewayd::net::set_liveness(fd, std::chrono::milliseconds(800)));
  BOOST_TEST(get_int(fd, IPPROTO_TCP, TCP_KEEPIDLE) == 1);
  BOOST_TEST(get_int(fd, IPPROTO_TCP, TCP_USER_TIMEOUT) == 800);
  ::close(fd);
}

BOOST_FIXTURE_TEST_CASE(a_dial_nobody_answers_gives_up_at_the_connect_timeout, io_fixture) {
  full_listener l;
  const auto t0 = std::chrono::steady_clock::now();
  auto c = make(spec(l.address(), 1000, gc::overflow_policy::drop_oldest), nullptr,
                {std::chrono::milliseconds(300), std::chrono::milliseconds(30000)});
  BOOST_TEST_REQUIRE(
      wait_until([&] { return connect_failures(*c, gc::connect_failure::timed_out) >= 1; }, 3s));
  // Not before its deadline: the kernel alone would have kept the dial for minutes.
  BOOST_TEST((std::chrono::steady_clock::now() - t0 >= 300ms));
  BOOST_TEST(!c->stats().connected.load());
  BOOST_TEST(connect_failures(*c, gc::connect_failure::refused) == 0u);
  // With room in the queue again, a later dial gets through.
  BOOST_TEST(wait_until(
      [&] {
        l.accept_all();
        return c->stats().connected.load();
      },
      5s));
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
}

BOOST_FIXTURE_TEST_CASE(a_dial_that_is_refused_is_counted_as_refused, io_fixture) {
  auto c = make(spec(unused_endpoint(), 1000, gc::overflow_policy::drop_oldest));
  BOOST_TEST(
      wait_until([&] { return connect_failures(*c, gc::connect_failure::refused) >= 2; }, 3s));
  BOOST_TEST(connect_failures(*c, gc::connect_failure::timed_out) == 0u);
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
}

// The consumer's process is alive and its host answers every probe with a closed window: only
// the timeout can tell it from a slow reader. What its host never acknowledged is counted.
BOOST_FIXTURE_TEST_CASE(a_peer_that_stops_acknowledging_is_cut_and_counted, io_fixture) {
  peer p(0, 16 * 1024);
  auto c = make(spec(p.address(), 100000, gc::overflow_policy::drop_oldest), nullptr,
                {std::chrono::milliseconds(5000), std::chrono::milliseconds(1000)});
  auto r = p.accept(2s);
  BOOST_REQUIRE(r);
  frame_source src(big_payload);
  fill_until_stuck(*c, src);
  const auto t0 = std::chrono::steady_clock::now();
  BOOST_TEST_REQUIRE(
      wait_until([&] { return disconnects(*c, gc::disconnect_reason::timed_out) >= 1; }, 15s),
      "still connected; sent " << c->stats().sent_bytes.load() << " bytes");
  // Zero-window probes back off from 200 ms on loopback: the cut comes after the 1 s limit and
  // well before the kernel's own bound (15 retries, many minutes).
  BOOST_TEST((std::chrono::steady_clock::now() - t0 < 12s));
  const auto unacked = c->stats().unacknowledged_bytes.load();
  BOOST_TEST(unacked > 0u);
  BOOST_TEST(unacked <= c->stats().sent_bytes.load());
  BOOST_TEST(disconnects(*c, gc::disconnect_reason::reset) == 0u);
  // It redials, and what was still queued goes out on the new connection.
  auto r2 = p.accept(3s);
  BOOST_REQUIRE(r2);
  BOOST_TEST(r2->wait_frames(1, 5s));
  (void)close_consumer(*c, 0ms);
}

// A consumer that resets its connection is told apart from one that closes it cleanly.
BOOST_FIXTURE_TEST_CASE(peer_closed_and_reset_are_told_apart, io_fixture) {
  peer p;
  auto c = make(spec(p.address(), 100000, gc::overflow_policy::drop_oldest));
  {
    auto r = p.accept(2s);
    BOOST_REQUIRE(r);
    BOOST_REQUIRE(wait_until([&] { return c->stats().connected.load(); }, 2s));
    r->close();  // nothing unread: a FIN
  }
  BOOST_TEST(
      wait_until([&] { return disconnects(*c, gc::disconnect_reason::peer_closed) == 1; }, 3s));
  auto r = p.accept(3s);
  BOOST_REQUIRE(r);
  frame_source src(big_payload);
  fill_until_stuck(*c, src);
  r->close();  // unread data: the kernel sends a reset
  BOOST_TEST(wait_until([&] { return disconnects(*c, gc::disconnect_reason::reset) == 1; }, 3s));
  BOOST_TEST(disconnects(*c, gc::disconnect_reason::peer_closed) == 1u);
  BOOST_TEST(disconnects(*c, gc::disconnect_reason::timed_out) == 0u);
  BOOST_TEST(c->stats().reconnects.load() >= 1u);
  (void)close_consumer(*c, 0ms);
}
