// Consumers that misbehave on purpose, against the real daemon on loopback: one that commits an
// ack protocol error on every connection must be redialled with a growing backoff, not every
// 100 ms (issue 29, item 5); one that floods acks that move nothing, or sends bytes without
// `ack`, must not make the gateway read forever (issue 42, item 5).
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/test/unit_test.hpp>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "protocol/control_message.hpp"
#include "protocol/frame_codec.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"
#include "tests/support/wait_until.hpp"

using namespace gatewayd;
using namespace gatewayd::test;
using namespace std::chrono_literals;

namespace {

double metric(const gateway_fixture& gw, const std::string& series) {
  return scrape_metric(gw.metrics_port, series);
}

std::string ack(std::uint64_t n) {
  std::string out;
  protocol::append_control(out, {protocol::control_message::kind::ack, n});
  return out;
}

// A listening socket on 127.0.0.1 that the test drives by hand: accepts the gateway's
// connections, reads its frames, writes raw bytes back.
class raw_listener {
 public:
  raw_listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOST_TEST_REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    BOOST_TEST_REQUIRE(::listen(fd_, 64) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~raw_listener() { ::close(fd_); }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }
  // The next connection within `timeout`, or -1.
  int accept(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return -1;
    return ::accept(fd_, nullptr, nullptr);
  }

 private:
  int fd_ = -1;
  unsigned short port_ = 0;
};

// Reads from `fd` until `n` whole frames arrived (false: closed, or 10 s passed).
bool read_frames(int fd, std::size_t n) {
  std::string in;
  std::size_t got = 0;
  while (got < n) {
    const auto r = protocol::parse_frame(in, 1 << 20);
    if (r.state == protocol::parse_result::status::frame) {
      in.erase(0, r.frame.bytes.size());
      ++got;
      continue;
    }
    if (r.state == protocol::parse_result::status::error) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10000) <= 0) return false;
    char buf[4096];
    const ssize_t k = ::recv(fd, buf, sizeof buf, 0);
    if (k <= 0) return false;
    in.append(buf, static_cast<std::size_t>(k));
  }
  return true;
}

// Sends `chunk` again and again to `fd` until the peer ends the connection (true) or `cap`
// bytes went out, or 20 s passed (false). `sent`: what the kernel took.
bool flood_until_closed(int fd, const std::string& chunk, std::uint64_t cap, std::uint64_t& sent) {
  sent = 0;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (sent < cap && std::chrono::steady_clock::now() < deadline) {
    // From where the last send stopped: a stream of whole frames stays one.
    const std::size_t at = sent % chunk.size();
    const ssize_t k = ::send(fd, chunk.data() + at, chunk.size() - at, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      sent += static_cast<std::uint64_t>(k);
      continue;
    }
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return true;  // reset: closed
    pollfd p{fd, POLLOUT | POLLRDHUP, 0};
    ::poll(&p, 1, 100);
    if (p.revents & (POLLERR | POLLHUP | POLLRDHUP)) return true;
  }
  return false;
}

// At most this much of a flood may go out before the gateway ends the connection: the bound the
// gateway reads (1 MiB of acks, a few KiB of anything else) plus what the two sockets' kernel
// buffers hold on loopback (some 10 MiB at most). Before: the gateway read all 64 MiB.
constexpr std::uint64_t flood_cap = 64u << 20;

}  // namespace

// The ack consumer: it takes 10 frames, then repeats `ack 0` as fast as it can (7.3 GB
// read in 6 s before). Acks that move nothing, past 1 MiB of them in a row, end the connection
// as a protocol error: counted, redialled, its 10 unacknowledged frames first on the next one.
BOOST_AUTO_TEST_CASE(acks_that_do_not_advance_end_the_connection_after_a_bound) {
  raw_listener consumer;
  gateway_fixture gw(
      consumer_toml("acked", consumer.endpoint(), "ack = true") + route_toml("t.>", {"acked"}),
      "reconnect_initial_ms = 50");
  const int fd = consumer.accept(10s);
  BOOST_TEST_REQUIRE(fd >= 0);
  test_supplier s(gw.supplier_port);
  std::string frames;
  for (int i = 0; i < 10; ++i)
    protocol::append_frame(frames, "t.a", "frame " + std::to_string(i));
  s.send(frames);
  BOOST_TEST_REQUIRE(read_frames(fd, 10));

  std::string burst;
  const std::string one = ack(0);
  while (burst.size() + one.size() <= 64 * 1024)
    burst += one;
  std::uint64_t sent = 0;
  const bool closed = flood_until_closed(fd, burst, flood_cap, sent);
  BOOST_TEST_MESSAGE("ack 0 flood: " << sent << " bytes sent, then "
                                     << (closed ? "closed by the gateway" : "the cap"));
  BOOST_TEST_REQUIRE(closed, "the gateway read " << sent << " bytes of acks that moved nothing");
  ::close(fd);
  BOOST_TEST(eventually(
      [&] {
        return metric(gw,
                      "gatewayd_consumer_protocol_errors_total{consumer=\"acked\",reason="
                      "\"ack_not_advancing\"}") == 1;
      },
      10s));

  // Redialled; its 10 unacknowledged frames come first, and acks on the new connection settle them.
  const int again = consumer.accept(10s);
  BOOST_TEST_REQUIRE(again >= 0);
  BOOST_TEST_REQUIRE(read_frames(again, 10));
  const std::string last = ack(10);
  BOOST_TEST_REQUIRE(::send(again, last.data(), last.size(), MSG_NOSIGNAL) ==
                     static_cast<ssize_t>(last.size()));
  BOOST_TEST(eventually(
      [&] { return metric(gw, "gatewayd_consumer_unacked_frames{consumer=\"acked\"}") == 0; },
      10s));
  ::close(again);
}

// The other consumer: no `ack`, and it sends garbage back as fast as it can (955 MB read
// in 6 s at 111 % CPU before). Past a few KiB that is a protocol error: the connection is ended,
// counted, and redialled; frames still reach it on the next connection.
BOOST_AUTO_TEST_CASE(a_consumer_without_ack_that_sends_bytes_is_disconnected) {
  raw_listener consumer;
  gateway_fixture gw(consumer_toml("plain", consumer.endpoint()) + route_toml("t.>", {"plain"}),
                     "reconnect_initial_ms = 50");
  const int fd = consumer.accept(10s);
  BOOST_TEST_REQUIRE(fd >= 0);
  BOOST_TEST_REQUIRE(gw.consumers_connected({"plain"}));
  const std::string garbage(64 * 1024, 'x');
  std::uint64_t sent = 0;
  const bool closed = flood_until_closed(fd, garbage, flood_cap, sent);
  BOOST_TEST_MESSAGE("garbage flood: " << sent << " bytes sent, then "
                                       << (closed ? "closed by the gateway" : "the cap"));
  BOOST_TEST_REQUIRE(closed, "the gateway read " << sent << " bytes from a consumer without ack");
  ::close(fd);
  BOOST_TEST(eventually(
      [&] {
        return metric(gw,
                      "gatewayd_consumer_protocol_errors_total{consumer=\"plain\",reason="
                      "\"unsolicited_bytes\"}") == 1;
      },
      10s));

  const int again = consumer.accept(10s);
  BOOST_TEST_REQUIRE(again >= 0);
  test_supplier s(gw.supplier_port);
  s.send_frame("t.a", "still delivered");
  BOOST_TEST(read_frames(again, 1));
  ::close(again);
}

// A consumer that sends an ack above what was written (a protocol error) the moment each
// connection opens. The gateway closes each connection and redials with a growing backoff:
// with reconnect_initial_ms = 50, 8 connections at most fit in 2.5 s (delays of 25-50, 50-100,
// 100-200, ... ms; 10 allowed for one already waiting). Before: come_up reset the backoff, so
// every redial came 25-50 ms later: some 50 connections in the same window.
BOOST_AUTO_TEST_CASE(a_consumer_that_errs_on_every_connection_is_redialled_with_backoff) {
  raw_listener consumer;
  gateway_fixture gw(
      consumer_toml("acked", consumer.endpoint(), "ack = true") + route_toml("t.>", {"acked"}),
      "reconnect_initial_ms = 50");
  const std::string bad = ack(5);  // nothing was written: too high
  std::vector<int> connections;
  const auto first = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - first < 2500ms) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        2500ms - (std::chrono::steady_clock::now() - first));
    const int fd = consumer.accept(std::max(left, 1ms));
    if (fd < 0) continue;
    connections.push_back(fd);
    ::send(fd, bad.data(), bad.size(), MSG_NOSIGNAL);
  }
  for (const int fd : connections)
    ::close(fd);
  BOOST_TEST_MESSAGE(connections.size() << " connections in 2.5 s");
  BOOST_TEST_REQUIRE(connections.size() >= 3u);  // it does redial
  BOOST_TEST(connections.size() <= 10u);
  BOOST_TEST(metric(gw,
                    "gatewayd_consumer_protocol_errors_total{consumer=\"acked\",reason="
                    "\"ack_too_high\"}") >= static_cast<double>(connections.size() - 1));
}
