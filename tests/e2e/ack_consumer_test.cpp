// `ack = true` consumers (issue 25, consumer leg) against the real daemon on loopback: frames
// written stay held until acknowledged and go first to the next connection, a consumer that
// does not acknowledge is held to max_unacked_bytes and meets its overflow policy, and one that
// sends anything but well-formed acks has only its own connection closed.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <csignal>
#include <cstdio>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "protocol/control_message.hpp"
#include "protocol/frame_codec.hpp"
#include "tests/support/daemon_process.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/peer_tool.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"
#include "tests/support/tls_peers.hpp"
#include "tools/traffic/payload.hpp"

using namespace gatewayd;
using namespace gatewayd::test;
using namespace std::chrono_literals;

namespace {

double metric(const gateway_fixture& gw, const std::string& series) {
  return scrape_metric(gw.metrics_port, series);
}

// A numbered payload (gateway-peer checks its order) whose printable tail names its sequence,
// so that `recv --print` shows which frame each one was.
std::string payload(std::uint64_t seq) {
  char tail[32];
  std::snprintf(tail, sizeof tail, "seq=%08llu;", static_cast<unsigned long long>(seq));
  return traffic::numbered_payload(0, seq, traffic::header_size) + tail;
}

std::string frames(std::uint64_t from, std::uint64_t to) {
  std::string out;
  for (std::uint64_t i = from; i < to; ++i)
    protocol::append_frame(out, "t.a", payload(i));
  return out;
}

// Every sequence `recv --print` showed in `log`, in order of arrival.
std::vector<std::uint64_t> printed(const std::string& log) {
  std::vector<std::uint64_t> seqs;
  static const std::regex seq("seq=([0-9]{8});");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), seq); it != std::sregex_iterator();
       ++it)
    seqs.push_back(std::stoull((*it)[1].str()));
  return seqs;
}

std::size_t count_of(const std::string& log, std::uint64_t seq) {
  const auto all = printed(log);
  return static_cast<std::size_t>(std::count(all.begin(), all.end(), seq));
}

std::unique_ptr<daemon_process> start_recv(const temp_dir& dir, const std::string& name,
                                           std::vector<std::string> args) {
  args.insert(args.begin(), "recv");
  return std::make_unique<daemon_process>(peer_binary(), args, dir.path() / (name + ".log"));
}

}  // namespace

// (b) An `ack = true` consumer SIGKILLed with frames written to it but not read (its reader had
// stalled: they sat in its kernel buffers) and started again on the same port: every frame
// reaches it, those it had not acknowledged on the next connection first; a plain consumer
// beside it loses nothing either. Before: what its kernel had taken was counted as sent and
// lost with the process.
BOOST_AUTO_TEST_CASE(a_killed_ack_consumer_gets_every_frame_on_its_next_connection) {
  temp_dir peers;
  constexpr std::uint64_t total = 20000;
  peer_receiver plain(peers, "plain", {"--expect", std::to_string(total), "--json"});
  const unsigned short port = free_port();
  const std::string at = "127.0.0.1:" + std::to_string(port);
  auto first =
      start_recv(peers, "acked-1",
                 {"--listen", at, "--ack", "--print", "--stall-after", "0.2", "--one-consumer"});
  BOOST_TEST_REQUIRE(first->wait_for_log("listening on", 10s).has_value(), first->log());

  gateway_fixture gw(consumer_toml("acked", at, "ack = true\nqueue_capacity = 100000") +
                         consumer_toml("plain", plain.endpoint(), "queue_capacity = 100000") +
                         route_toml("t.>", {"acked", "plain"}),
                     "slow_consumer_ms = 60000");
  BOOST_TEST_REQUIRE(gw.consumers_connected({"acked", "plain"}));
  test_supplier s(gw.supplier_port);
  s.send(frames(0, 2000));
  // The first one stops reading: what the gateway writes after that waits unacknowledged.
  BOOST_TEST_REQUIRE(first->wait_for_log("stalled", 20s).has_value(), first->log());
  s.send(frames(2000, total / 2));
  BOOST_TEST_REQUIRE(eventually(
      [&] { return metric(gw, "gatewayd_consumer_unacked_frames{consumer=\"acked\"}") > 0; }, 10s));
  first->signal(SIGKILL);
  BOOST_TEST_REQUIRE(first->wait_exit(10s).has_value());
  const std::string first_log = first->log();

  auto second = start_recv(peers, "acked-2", {"--listen", at, "--ack", "--print"});
  s.send(frames(total / 2, total));
  BOOST_TEST_REQUIRE(eventually([&] { return count_of(second->log(), total - 1) >= 1; }, 30s),
                     second->log());
  // Everything it was sent is acknowledged: nothing is held any more.
  BOOST_TEST(eventually(
      [&] { return metric(gw, "gatewayd_consumer_unacked_frames{consumer=\"acked\"}") == 0; },
      10s));

  const auto a = printed(first_log);
  const auto b = printed(second->log());
  std::set<std::uint64_t> seen(a.begin(), a.end());
  seen.insert(b.begin(), b.end());
  BOOST_TEST(seen.size() == total);  // lost = 0
  BOOST_TEST(*seen.rbegin() == total - 1);
  const std::size_t duplicates = a.size() + b.size() - seen.size();
  BOOST_TEST_MESSAGE("first read " << a.size() << ", second " << b.size() << ", duplicates "
                                   << duplicates);
  // The second connection begins with the frames the first had not acknowledged, in order: no
  // later than the first one's last frame plus one, and in sequence from there.
  BOOST_TEST_REQUIRE(!b.empty());
  BOOST_TEST(b.front() <= (a.empty() ? 0 : a.back() + 1));
  for (std::size_t i = 1; i < b.size(); ++i) {
    BOOST_TEST_INFO("frame " << i << " of the second connection");
    BOOST_TEST(b[i] == b[i - 1] + 1);
  }
  const double redelivered =
      metric(gw, "gatewayd_consumer_redelivered_frames_total{consumer=\"acked\"}");
  BOOST_TEST(redelivered > 0);
  BOOST_TEST(redelivered >= static_cast<double>(duplicates));
  // The plain consumer beside it: everything, in order, once.
  BOOST_TEST_REQUIRE(plain.process->wait_exit(30s).has_value(), plain.process->log());
  const auto log = plain.process->log();
  BOOST_TEST(json_field(log, "frames") == static_cast<long long>(total), log);
  BOOST_TEST(json_field(log, "lost") == 0, log);
  BOOST_TEST(json_field(log, "duplicated") == 0, log);
}

// (c) An `ack = true` consumer that reads everything and never acknowledges: the gateway holds
// no more than max_unacked_bytes for it (give or take one frame), then it is not keeping up:
// its overflow policy (drop-newest) applies and counts drops; another consumer of the same
// frames gets every one. Before: frames written were let go at once, nothing was held.
BOOST_AUTO_TEST_CASE(a_consumer_that_never_acks_is_held_to_max_unacked_bytes) {
  temp_dir peers;
  constexpr std::uint64_t total = 20000;
  peer_receiver plain(peers, "plain", {"--expect", std::to_string(total), "--json"});
  peer_receiver mute(peers, "mute", {"--json"});  // reads, never acks
  constexpr std::uint64_t max_unacked = 16384;
  gateway_fixture gw(
      consumer_toml("mute", mute.endpoint(),
                    "ack = true\nmax_unacked_bytes = " + std::to_string(max_unacked) +
                        "\noverflow = \"drop-newest\"\nqueue_capacity = 100") +
          consumer_toml("plain", plain.endpoint(), "queue_capacity = 100000") +
          route_toml("t.>", {"mute", "plain"}),
      "slow_consumer_ms = 50");
  BOOST_TEST_REQUIRE(gw.consumers_connected({"mute", "plain"}));
  test_supplier s(gw.supplier_port);
  s.send(frames(0, total));
  BOOST_TEST_REQUIRE(plain.process->wait_exit(30s).has_value(), plain.process->log());
  const auto log = plain.process->log();
  BOOST_TEST(json_field(log, "frames") == static_cast<long long>(total), log);
  BOOST_TEST(json_field(log, "lost") == 0, log);

  const std::size_t frame_size = protocol::encode_frame("t.a", payload(0)).size();
  BOOST_TEST_REQUIRE(eventually(
      [&] {
        return metric(gw,
                      "gatewayd_consumer_dropped_messages_total{consumer=\"mute\",reason="
                      "\"queue_full\"}") > 0;
      },
      10s));
  const double held = metric(gw, "gatewayd_consumer_unacked_bytes{consumer=\"mute\"}");
  BOOST_TEST(held >= static_cast<double>(max_unacked - frame_size));
  BOOST_TEST(held <= static_cast<double>(max_unacked + frame_size));
  const double sent = metric(gw, "gatewayd_consumer_messages_sent_total{consumer=\"mute\"}");
  BOOST_TEST(sent * static_cast<double>(frame_size) <=
             static_cast<double>(max_unacked + frame_size));
  BOOST_TEST(metric(gw, "gatewayd_consumer_unacked_frames{consumer=\"mute\"}") == sent);
  // What it was sent, plus what waits in its queue, plus the drops: every frame routed to it.
  const double dropped = metric(
      gw, "gatewayd_consumer_dropped_messages_total{consumer=\"mute\",reason=\"queue_full\"}");
  const double queued = metric(gw, "gatewayd_consumer_queue_depth{consumer=\"mute\"}");
  BOOST_TEST(sent + queued + dropped == static_cast<double>(total));
  BOOST_TEST(queued <= 100);
}

namespace {

// The test as an `ack = true` consumer speaking raw bytes: it listens on 127.0.0.1, takes the
// gateway's connections one after another, reads frames and writes whatever it is told to.
class raw_consumer {
 public:
  raw_consumer() {
    listen_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOST_TEST_REQUIRE(::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    BOOST_TEST_REQUIRE(::listen(listen_, 8) == 0);
    socklen_t len = sizeof a;
    ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~raw_consumer() {
    drop();
    ::close(listen_);
  }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }

  // The next connection of the gateway (within 20 s).
  bool accept_next() {
    drop();
    pollfd p{listen_, POLLIN, 0};
    if (::poll(&p, 1, 20000) <= 0) return false;
    fd_ = ::accept(listen_, nullptr, nullptr);
    in_.clear();
    return fd_ >= 0;
  }
  // The payload sequences of the next `n` frames (fewer: the connection ended or 20 s passed).
  std::vector<std::uint64_t> read(std::size_t n) {
    std::vector<std::uint64_t> seqs;
    while (seqs.size() < n) {
      const auto r = protocol::parse_frame(in_, 1 << 20);
      if (r.state == protocol::parse_result::status::frame) {
        seqs.push_back(printed(std::string(r.frame.payload)).at(0));
        in_.erase(0, r.frame.bytes.size());
        continue;
      }
      if (r.state == protocol::parse_result::status::error) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20000) <= 0) break;
      char buf[65536];
      const ssize_t got = ::recv(fd_, buf, sizeof buf, 0);
      if (got <= 0) break;
      in_.append(buf, static_cast<std::size_t>(got));
    }
    return seqs;
  }
  void send(const std::string& bytes) {
    BOOST_TEST_REQUIRE(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
                       static_cast<ssize_t>(bytes.size()));
  }
  void ack(std::uint64_t n) {
    std::string out;
    protocol::append_control(out, {protocol::control_message::kind::ack, n});
    send(out);
  }
  // True once the gateway closed this connection (EOF or reset within 10 s), everything it
  // sent before read and thrown away.
  bool closed_by_gateway() {
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 10000) <= 0) return false;
      char buf[65536];
      const ssize_t got = ::recv(fd_, buf, sizeof buf, 0);
      if (got <= 0) return true;
    }
  }

 private:
  void drop() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int listen_ = -1;
  int fd_ = -1;
  unsigned short port_ = 0;
  std::string in_;
};

std::vector<std::uint64_t> range(std::uint64_t from, std::uint64_t to) {
  std::vector<std::uint64_t> v;
  for (std::uint64_t i = from; i < to; ++i)
    v.push_back(i);
  return v;
}

}  // namespace

// (e) Malformed control frames from an `ack = true` consumer: garbage, a data frame, an ack above
// the frames written on the connection, an ack below the previous one. Each closes that
// connection only (counted by reason); the gateway redials and writes the frames not
// acknowledged first, in order. A plain consumer of the same frames is not disturbed.
BOOST_AUTO_TEST_CASE(malformed_control_frames_close_only_that_connection) {
  raw_consumer acked;
  test_consumer plain;
  gateway_fixture gw(consumer_toml("acked", acked.endpoint(), "ack = true") +
                         consumer_toml("plain", plain.endpoint()) +
                         route_toml("t.>", {"acked", "plain"}),
                     "reconnect_initial_ms = 10");
  BOOST_TEST_REQUIRE(acked.accept_next());
  test_supplier s(gw.supplier_port);
  s.send(frames(0, 10));
  BOOST_TEST((acked.read(10) == range(0, 10)));
  acked.ack(4);  // frames 0..3 are its own
  BOOST_TEST_REQUIRE(eventually(
      [&] { return metric(gw, "gatewayd_consumer_unacked_frames{consumer=\"acked\"}") == 6; },
      10s));

  // Garbage.
  acked.send("this is not GWP/1 at all");
  BOOST_TEST_REQUIRE(acked.closed_by_gateway());
  BOOST_TEST_REQUIRE(acked.accept_next());
  BOOST_TEST((acked.read(6) == range(4, 10)));

  // A data frame.
  acked.send(protocol::encode_frame("t.a", "a consumer sends no data"));
  BOOST_TEST_REQUIRE(acked.closed_by_gateway());
  BOOST_TEST_REQUIRE(acked.accept_next());
  BOOST_TEST((acked.read(6) == range(4, 10)));

  // An ack above the 6 frames written on this connection.
  acked.ack(7);
  BOOST_TEST_REQUIRE(acked.closed_by_gateway());
  BOOST_TEST_REQUIRE(acked.accept_next());
  BOOST_TEST((acked.read(6) == range(4, 10)));

  // A decreasing ack (the first one counts: frames 4..6 are its own).
  acked.ack(3);
  acked.ack(2);
  BOOST_TEST_REQUIRE(acked.closed_by_gateway());
  BOOST_TEST_REQUIRE(acked.accept_next());
  BOOST_TEST((acked.read(3) == range(7, 10)));

  // Well-formed from here on: everything is acknowledged, new frames flow.
  acked.ack(3);
  s.send(frames(10, 15));
  BOOST_TEST((acked.read(5) == range(10, 15)));
  acked.ack(8);
  BOOST_TEST(eventually(
      [&] { return metric(gw, "gatewayd_consumer_unacked_frames{consumer=\"acked\"}") == 0; },
      10s));

  for (const char* reason : {"bad_frame", "not_control", "ack_too_high", "ack_decreasing"}) {
    BOOST_TEST_INFO(reason);
    BOOST_TEST(metric(gw, std::string("gatewayd_consumer_protocol_errors_total{consumer=\"acked\","
                                      "reason=\"") +
                              reason + "\"}") == 1);
  }
  BOOST_TEST(metric(gw,
                    "gatewayd_consumer_disconnects_total{consumer=\"acked\",reason=\""
                    "protocol_error\"}") == 4);
  BOOST_TEST(metric(gw, "gatewayd_consumer_redelivered_frames_total{consumer=\"acked\"}") ==
             6 + 6 + 6 + 3);
  // The plain consumer: one connection, every frame once.
  BOOST_TEST(plain.wait_for_count(15, 10s));
  BOOST_TEST(plain.count() == 15u);
  BOOST_TEST(plain.connections() == 1u);
  BOOST_TEST(metric(gw,
                    "gatewayd_consumer_disconnects_total{consumer=\"plain\",reason=\""
                    "protocol_error\"}") == 0);
}

// A reload that turns `ack` on replaces the consumer (a frame written to it means something
// else): the new one holds what it writes until acknowledged, which this consumer never does.
// One that changes max_unacked_bytes only is reconfigured in place. Before: the reload kept the
// consumer as it was, letting frames go as written.
BOOST_AUTO_TEST_CASE(a_reload_that_changes_ack_replaces_the_consumer) {
  test_consumer x;
  const auto routes = [&](const std::string& extra) {
    return consumer_toml("x", x.endpoint(), extra) + route_toml("t.>", {"x"});
  };
  gateway_fixture gw(routes(""));
  BOOST_TEST_REQUIRE(gw.consumers_connected({"x"}));
  test_supplier s(gw.supplier_port);
  s.send(frames(0, 10));
  BOOST_TEST_REQUIRE(x.wait_for_count(10, 10s));
  BOOST_TEST(metric(gw, "gatewayd_consumer_unacked_frames{consumer=\"x\"}") == -1);  // no series

  const auto reload = [&](const std::string& extra, double nth) {
    gw.dir.write("routes.toml", routes(extra));
    gw.daemon->signal(SIGHUP);
    return eventually(
        [&] { return metric(gw, "gatewayd_config_reloads_total{result=\"success\"}") >= nth; },
        10s);
  };
  BOOST_TEST_REQUIRE(reload("ack = true", 1));
  BOOST_TEST_REQUIRE(x.wait_for_connections(2, 10s));
  BOOST_TEST_REQUIRE(gw.consumers_connected({"x"}));
  s.send(frames(10, 20));
  BOOST_TEST_REQUIRE(x.wait_for_count(20, 10s));
  BOOST_TEST(eventually(
      [&] { return metric(gw, "gatewayd_consumer_unacked_frames{consumer=\"x\"}") == 10; }, 10s));

  // Another limit: the same consumer (its connection and what it holds stay).
  BOOST_TEST_REQUIRE(reload("ack = true\nmax_unacked_bytes = 100000", 2));
  s.send(frames(20, 25));
  BOOST_TEST_REQUIRE(x.wait_for_count(25, 10s));
  BOOST_TEST(eventually(
      [&] { return metric(gw, "gatewayd_consumer_unacked_frames{consumer=\"x\"}") == 15; }, 10s));
  BOOST_TEST(x.connections() == 2u);
}

// A TLS consumer with `ack = true`: its acks come back through the TLS channel (the link reads
// them out of the stream, not the socket), so everything it takes is let go. Before: TLS or
// not, nothing was read; with holding but acks read from the socket, the records would not
// parse and the connection would close as bad_frame.
BOOST_AUTO_TEST_CASE(a_tls_consumer_acks_through_its_tls_connection) {
  pki p;
  temp_dir peers;
  constexpr std::uint64_t total = 5000;
  peer_receiver recv(peers, "tls",
                     {"--ack", "--json", "--tls-cert", p.at("gateway.crt").string(), "--tls-key",
                      p.at("gateway.key").string()});
  gateway_fixture gw(consumer_toml("secure", recv.endpoint(),
                                   "ack = true\nqueue_capacity = 100000\ntls = { ca = \"" +
                                       p.at("ca.crt").string() +
                                       "\", server_name = \"gateway.test\" }") +
                     route_toml("t.>", {"secure"}));
  BOOST_TEST_REQUIRE(gw.consumers_connected({"secure"}));
  test_supplier s(gw.supplier_port);
  s.send(frames(0, total));
  // Everything written, and everything acknowledged through TLS: nothing held.
  BOOST_TEST(eventually(
      [&] {
        return metric(gw, "gatewayd_consumer_messages_sent_total{consumer=\"secure\"}") ==
                   static_cast<double>(total) &&
               metric(gw, "gatewayd_consumer_unacked_frames{consumer=\"secure\"}") == 0;
      },
      20s));
  for (const char* reason :
       {"bad_frame", "not_control", "not_ack", "ack_decreasing", "ack_too_high"}) {
    BOOST_TEST_INFO(reason);
    BOOST_TEST(metric(gw, std::string("gatewayd_consumer_protocol_errors_total{consumer=\"secure\","
                                      "reason=\"") +
                              reason + "\"}") == 0);
  }
  BOOST_TEST(metric(gw, "gatewayd_consumer_reconnects_total{consumer=\"secure\"}") == 0);
  recv.process->signal(SIGINT);
  BOOST_TEST_REQUIRE(recv.process->wait_exit(20s).has_value());
  const auto log = recv.process->log();
  BOOST_TEST(json_field(log, "frames") == static_cast<long long>(total), log);
  BOOST_TEST(json_field(log, "lost") == 0, log);
  BOOST_TEST(json_field(log, "acks") > 0, log);
}

// A reload that removes an `ack = true` consumer which never acknowledges: its drain waits for
// acks until drain_timeout_ms, then what it still holds is let go (consumer_acks::abandon_all) and
// counted as dropped with reason removed, beside what was still queued. Before: the frames
// counted as sent when written, nothing counted at the removal.
BOOST_AUTO_TEST_CASE(a_removed_ack_consumer_counts_what_it_held_as_removed) {
  raw_consumer acked;
  test_consumer plain;
  const std::string both = consumer_toml("acked", acked.endpoint(), "ack = true") +
                           consumer_toml("plain", plain.endpoint()) +
                           route_toml("t.>", {"acked", "plain"});
  gateway_fixture gw(both, "drain_timeout_ms = 300");
  BOOST_TEST_REQUIRE(acked.accept_next());
  test_supplier s(gw.supplier_port);
  s.send(frames(0, 10));
  BOOST_TEST((acked.read(10) == range(0, 10)));
  acked.ack(3);
  BOOST_TEST_REQUIRE(eventually(
      [&] { return metric(gw, "gatewayd_consumer_unacked_frames{consumer=\"acked\"}") == 7; },
      10s));

  gw.dir.write("routes.toml",
               consumer_toml("plain", plain.endpoint()) + route_toml("t.>", {"plain"}));
  gw.daemon->signal(SIGHUP);
  BOOST_TEST(eventually(
      [&] {
        return metric(gw,
                      "gatewayd_consumer_dropped_messages_total{consumer=\"acked\",reason="
                      "\"removed\"}") == 7;
      },
      10s));
  BOOST_TEST(metric(gw, "gatewayd_consumer_unacked_frames{consumer=\"acked\"}") == 0);
  BOOST_TEST(acked.closed_by_gateway());
  BOOST_TEST(plain.wait_for_count(10, 10s));
}

// max_unacked_bytes paces the consumer by its acks: with room for three frames the gateway
// writes three, waits (the writer parked, nothing dropped: backpressure), and each ack that
// makes room lets the next ones go, in order, until all are delivered. Before: all 30 written
// at once, none held.
BOOST_AUTO_TEST_CASE(acks_that_make_room_resume_the_writer) {
  raw_consumer acked;
  const std::size_t frame_size = protocol::encode_frame("t.a", payload(0)).size();
  gateway_fixture gw(
      consumer_toml("acked", acked.endpoint(),
                    "ack = true\nmax_unacked_bytes = " + std::to_string(3 * frame_size) +
                        "\noverflow = \"backpressure\"") +
      route_toml("t.>", {"acked"}));
  BOOST_TEST_REQUIRE(acked.accept_next());
  test_supplier s(gw.supplier_port);
  s.send(frames(0, 30));
  std::vector<std::uint64_t> got;
  for (std::uint64_t n = 3; n <= 30; n += 3) {
    BOOST_TEST_INFO("up to frame " << n);
    // Written: three more, and no further until acknowledged.
    BOOST_TEST_REQUIRE(eventually(
        [&] {
          return metric(gw, "gatewayd_consumer_messages_sent_total{consumer=\"acked\"}") ==
                     static_cast<double>(n) &&
                 metric(gw, "gatewayd_consumer_unacked_frames{consumer=\"acked\"}") == 3;
        },
        10s));
    const auto three = acked.read(3);
    got.insert(got.end(), three.begin(), three.end());
    acked.ack(n);
  }
  BOOST_TEST((got == range(0, 30)));
  BOOST_TEST(eventually(
      [&] { return metric(gw, "gatewayd_consumer_unacked_frames{consumer=\"acked\"}") == 0; },
      10s));
  BOOST_TEST(metric(gw, "gatewayd_consumer_reconnects_total{consumer=\"acked\"}") == 0);
  BOOST_TEST(gatewayd::test::scrape_metric(gw.metrics_port,
                                           "gatewayd_consumer_dropped_messages_total{consumer="
                                           "\"acked\",reason=\"queue_full\"}") == 0);
}
