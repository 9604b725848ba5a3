#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <unistd.h>

#include <sstream>
#include <thread>

#include "tests/support/forked_consumer.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/http_get.hpp"
#include "tests/support/kernel_buffers.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"
#include "tools/traffic/sockets.hpp"
#include "tools/traffic/traffic_consumer.hpp"
#include "tools/traffic/traffic_supplier.hpp"

using namespace gatewayd::test;
using namespace gatewayd::traffic;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

std::string lossless(const std::string& name, const std::string& endpoint) {
  return consumer_toml(name, endpoint, "queue_capacity = 100000\noverflow = \"backpressure\"");
}

// GATEWAYD_STORM_ROUNDS overrides the 100 reloads (for a quick look while debugging).
const int storm_rounds =
    std::getenv("GATEWAYD_STORM_ROUNDS") ? std::atoi(std::getenv("GATEWAYD_STORM_ROUNDS")) : 100;
const std::string fast_redial = "reconnect_initial_ms = 50\nreconnect_max_ms = 200\n";

}  // namespace

namespace {

// The killed connection's byte stream at the moment the consumer froze: what the gateway's
// socket took, where the consumer had read to, and what the kernel held between the two.
struct frozen_stream {
  std::uint64_t sent_frames = 0;      // gatewayd_consumer_messages_sent_total
  std::uint64_t received_frames = 0;  // whole frames the consumer counted
  std::uint64_t read_bytes = 0;       // the consumer's read(2)s (rchar)
  connection_queues kernel;
  std::uint64_t written_bytes() const { return read_bytes + kernel.unread + kernel.unacknowledged; }
  bool operator==(const frozen_stream&) const = default;
};

// Stops the consumer (SIGSTOP) and waits until nothing moves: the gateway fills the kernel's
// buffers and waits for room, its sent count and the queues stay put. A consumer stopped
// between a read and the tally of what it read is let run a moment and stopped again.
std::optional<frozen_stream> freeze(pid_t consumer, unsigned short port, unsigned short metrics,
                                    const consumer_tally& tally, std::uint64_t frame_size) {
  auto sample = [&] {
    std::optional<frozen_stream> f;
    const auto kernel = queues_of_connection_to(port);
    const auto read = bytes_read_by(consumer);
    if (!kernel || !read) return f;
    f = frozen_stream{static_cast<std::uint64_t>(scrape_metric(
                          metrics, "gatewayd_consumer_messages_sent_total{consumer=\"c0\"}")),
                      tally.frames.load(), *read, *kernel};
    return f;
  };
  for (int attempt = 0; attempt < 10; ++attempt) {
    ::kill(consumer, SIGSTOP);
    std::optional<frozen_stream> last;
    bool settled = false;
    for (int i = 0; i < 100 && !settled; ++i) {
      std::this_thread::sleep_for(100ms);
      const auto now = sample();
      settled = now && last && *now == *last;
      last = now;
    }
    if (settled && last->received_frames == last->read_bytes / frame_size) return last;
    ::kill(consumer, SIGCONT);
    std::this_thread::sleep_for(30ms);
  }
  return std::nullopt;
}

}  // namespace

// The consumer is frozen mid-stream with the kernel's buffers full, then SIGKILLed. TCP said
// "sent" for what the kernel took, so what dies with the consumer is exactly what its socket
// had not handed it (and what it read but never counted: nothing, once frozen between reads).
// Everything the gateway still held, the frame cut at its socket's edge first, reaches the
// restarted consumer, whole and in order.
BOOST_AUTO_TEST_CASE(a_consumer_killed_mid_stream_loses_exactly_what_the_kernel_held) {
  shared_tally before_kill, after_restart;
  const unsigned short port = free_port();
  pid_t consumer = fork_traffic_consumer(port, 0, *before_kill);
  gateway_fixture gw(
      lossless("c0", "127.0.0.1:" + std::to_string(port)) + route_toml("t.>", {"c0"}), fast_redial);
  constexpr std::size_t payload = 256;
  constexpr std::uint64_t frame_size = 10 + 5 + payload;  // address "t.0.0": every frame alike
  traffic_supplier s(
      gw.supplier_port,
      {.id = 0, .consumers = 1, .payload_size = payload, .batch = 16, .rate = 50000});
  BOOST_TEST_REQUIRE(eventually([&] { return before_kill->frames.load() > 20000; }, 30s));
  const auto frozen = freeze(consumer, port, gw.metrics_port, *before_kill, frame_size);
  BOOST_TEST_REQUIRE(frozen.has_value(), "the consumer's connection never stood still");
  kill_consumer_process(consumer);  // SIGKILL, with the kernel's buffers full
  // The gateway has seen the connection end before the consumer comes back.
  BOOST_TEST_REQUIRE(eventually(
      [&] {
        return scrape_metric(gw.metrics_port, "gatewayd_consumer_connected{consumer=\"c0\"}") == 0;
      },
      10s));
  consumer = fork_traffic_consumer(port, 0, *after_restart);
  BOOST_TEST(eventually([&] { return after_restart->frames.load() > 20000; }, 30s));
  s.stop();
  const std::uint64_t sent = s.sent();
  BOOST_TEST(eventually(
      [&] { return after_restart->lost.load() + after_restart->frames.load() == sent; }, 30s));
  kill_consumer_process(consumer);

  // Whole frames only, in order, never twice, on both sides of the cut.
  for (const consumer_tally* t : {&*before_kill, &*after_restart}) {
    BOOST_TEST(t->corrupt.load() == 0u);
    BOOST_TEST(t->misrouted.load() == 0u);
    BOOST_TEST(t->duplicated.load() == 0u);
    BOOST_TEST(t->connections.load() == 1u, (t == &*before_kill ? "killed" : "restarted")
                                                << " consumer; " << gw.daemon->log());
  }
  BOOST_TEST(before_kill->lost.load() == 0u);
  BOOST_TEST(before_kill->frames.load() == frozen->received_frames);

  // The accounting, in bytes of the killed connection's stream: the gateway counted as sent
  // exactly the frames its socket took whole (the one it was cut in stays unsent), and the
  // consumer counted exactly the whole frames it read (the one its last read cut is lost).
  const std::uint64_t written = frozen->written_bytes();
  BOOST_TEST(frozen->sent_frames == written / frame_size);
  BOOST_TEST(frozen->received_frames == frozen->read_bytes / frame_size);
  const std::uint64_t lost = frozen->sent_frames - frozen->received_frames;
  const std::uint64_t in_kernel = frozen->kernel.unread + frozen->kernel.unacknowledged;
  BOOST_TEST_MESSAGE("consumer SIGKILLed: gatewayd counted "
                     << frozen->sent_frames << " frames sent (" << written
                     << " bytes written, the last frame cut after " << written % frame_size
                     << "); the consumer read " << frozen->read_bytes << " bytes ("
                     << frozen->received_frames << " frames + " << frozen->read_bytes % frame_size
                     << " bytes of the next); the kernel held " << in_kernel << " bytes ("
                     << frozen->kernel.unread << " unread at the consumer, "
                     << frozen->kernel.unacknowledged << " unacknowledged at gatewayd): lost "
                     << lost << " frames, " << lost * frame_size << " bytes");
  // Nothing the gateway held is lost: the restarted consumer's first frame is the first one
  // not counted as sent (the cut frame, resent whole), and every later one arrives.
  BOOST_TEST(after_restart->lost.load() == frozen->sent_frames);
  BOOST_TEST(after_restart->frames.load() == sent - frozen->sent_frames);
  BOOST_TEST(before_kill->frames.load() + lost + after_restart->frames.load() == sent);
  BOOST_TEST(
      scrape_metric(gw.metrics_port, "gatewayd_consumer_reconnects_total{consumer=\"c0\"}") >= 1);
  // The gateway's own share of the loss is in its metrics, to the byte, and the cause is named.
  BOOST_TEST(scrape_metric(gw.metrics_port,
                           "gatewayd_consumer_unacknowledged_bytes_total{consumer=\"c0\"}") ==
             static_cast<double>(frozen->kernel.unacknowledged));
  BOOST_TEST(scrape_metric(gw.metrics_port,
                           "gatewayd_consumer_disconnects_total{consumer=\"c0\","
                           "reason=\"reset\"}") == 1);
}

BOOST_AUTO_TEST_CASE(a_consumer_down_at_start_gets_everything_once_it_comes_up) {
  const unsigned short port = free_port();
  gateway_fixture gw(
      lossless("late", "127.0.0.1:" + std::to_string(port)) + route_toml("t.>", {"late"}),
      fast_redial);
  const std::string connected = "gatewayd_consumer_connected{consumer=\"late\"}";
  std::uint64_t sent = 0;
  {
    traffic_supplier s(gw.supplier_port, {.id = 0, .consumers = 1, .batch = 10});
    BOOST_TEST_REQUIRE(eventually([&] { return s.sent() >= 5000; }, 30s));
    s.stop();
    sent = s.sent();
  }
  // Several failed dials.
  BOOST_TEST_REQUIRE(eventually(
      [&] {
        return scrape_metric(gw.metrics_port,
                             "gatewayd_consumer_connect_failures_total{consumer="
                             "\"late\",reason=\"refused\"}") >= 3;
      },
      10s));
  BOOST_TEST(scrape_metric(gw.metrics_port, connected) == 0);
  traffic_consumer late(0, port);
  BOOST_TEST(eventually([&] { return late.tally().frames.load() == sent; }, 30s));
  BOOST_TEST(late.tally().lost.load() == 0u);
  BOOST_TEST(late.tally().duplicated.load() == 0u);
  BOOST_TEST(late.tally().corrupt.load() == 0u);
  BOOST_TEST(scrape_metric(gw.metrics_port, connected) == 1);
}

BOOST_AUTO_TEST_CASE(gatewayd_killed_under_load_and_restarted_on_its_port_resumes) {
  traffic_consumer sink(0);
  gateway_fixture gw(lossless("c0", sink.endpoint()) + route_toml("t.>", {"c0"}), fast_redial);
  const unsigned short port = gw.supplier_port;
  // Pin the port the kernel chose, so the restarted daemon listens where suppliers redial.
  std::string config = "[gateway]\nsupplier_listen = \"127.0.0.1:";
  config += std::to_string(port);
  config += "\"\nthreads = 2\nroutes_file = \"routes.toml\"\n";
  config += fast_redial;
  config += "[metrics]\nlisten = \"127.0.0.1:0\"\n";
  gw.dir.write("gatewayd.toml", config);

  traffic_supplier::options o{
      .id = 0, .consumers = 1, .batch = 16, .rate = 20000, .reconnect = true};
  traffic_supplier s1(port, o);
  o.id = 1;
  traffic_supplier s2(port, o);
  BOOST_TEST_REQUIRE(eventually([&] { return sink.tally().frames.load() > 20000; }, 30s));

  const auto killed_at = clock_type::now();
  gw.daemon->signal(SIGKILL);
  BOOST_TEST_REQUIRE(gw.daemon->wait_exit(10s).has_value());
  const auto frames_at_kill = sink.tally().frames.load();
  gw.restart("gatewayd-restarted.log");
  BOOST_TEST_REQUIRE(gw.supplier_port == port);
  const auto listening_at = clock_type::now();
  // The old connection's last bytes may still arrive; wait for clearly new traffic.
  BOOST_TEST_REQUIRE(
      eventually([&] { return sink.tally().frames.load() > frames_at_kill + 1000; }, 30s));
  const auto resumed_at = clock_type::now();
  const auto ms = [](auto d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  };
  BOOST_TEST_MESSAGE("gatewayd SIGKILLed under load: restarted and listening after "
                     << ms(listening_at - killed_at) << " ms; traffic resumed after "
                     << ms(resumed_at - killed_at) << " ms; suppliers' longest outage "
                     << std::max(s1.longest_outage(), s2.longest_outage()).count() << " ms");
  BOOST_TEST(ms(resumed_at - killed_at) < 15000);
  BOOST_TEST(s1.reconnects() >= 1u);
  BOOST_TEST(s2.reconnects() >= 1u);
  s1.stop();
  s2.stop();
  // Frames queued in the killed daemon are gone (it had no disk); what arrives is whole,
  // in order and never twice.
  const auto& t = sink.tally();
  BOOST_TEST(t.corrupt.load() == 0u);
  BOOST_TEST(t.duplicated.load() == 0u);
  BOOST_TEST(t.misrouted.load() == 0u);
  BOOST_TEST(t.partial_at_close.load() <= 1u);  // the killed daemon's connection may end mid-frame
}

namespace {

// The reload storm needs SIGHUP reload (being built on branch `ops`). Probe the daemon: it
// must survive a SIGHUP and count one successful reload.
boost::test_tools::assertion_result daemon_reloads(boost::unit_test::test_unit_id) {
  test_consumer c;
  gateway_fixture gw(consumer_toml("c", c.endpoint()) + route_toml("a.>", {"c"}));
  gw.daemon->signal(SIGHUP);
  const bool ok = eventually(
      [&] {
        return scrape_metric(gw.metrics_port,
                             "gatewayd_config_reloads_total{result=\"success\"}") >= 1;
      },
      5s);
  boost::test_tools::assertion_result r(ok && gw.daemon->running());
  r.message() << "gatewayd does not reload its routing table on SIGHUP yet (branch ops)";
  return r;
}

std::string storm_routes(unsigned consumers, const std::vector<unsigned short>& ports, int round) {
  std::string routes;
  for (unsigned k = 0; k < consumers; ++k) {
    std::string name = "c";
    name += std::to_string(k);
    // Each round changes the table (a capacity, an extra route) but never where t.K.* goes.
    routes += consumer_toml(
        name, "127.0.0.1:" + std::to_string(ports[k]),
        "queue_capacity = " + std::to_string(100000 + round % 7) + "\noverflow = \"backpressure\"");
    std::string match = "t.";
    match += static_cast<char>('0' + k);
    match += ".>";
    routes += route_toml(match, {name});
  }
  std::string extra = "unused.r";
  extra += std::to_string(round);
  routes += route_toml(extra, {"c0"});
  return routes;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_reload_storm_under_traffic_loses_misroutes_and_duplicates_nothing,
                     *boost::unit_test::precondition(daemon_reloads)) {
  constexpr unsigned n = 4;  // S3: 4 suppliers -> 4 consumers, every supplier feeds every consumer
  std::vector<std::unique_ptr<traffic_consumer>> consumers;
  std::vector<unsigned short> ports;
  for (unsigned k = 0; k < n; ++k) {
    consumers.push_back(std::make_unique<traffic_consumer>(k));
    ports.push_back(consumers.back()->port());
  }
  gateway_fixture gw(storm_routes(n, ports, 0));
  std::vector<std::unique_ptr<traffic_supplier>> suppliers;
  for (unsigned i = 0; i < n; ++i)
    suppliers.push_back(std::make_unique<traffic_supplier>(
        gw.supplier_port, traffic_supplier::options{.id = i, .consumers = n, .rate = 20000}));
  BOOST_TEST_REQUIRE(
      eventually([&] { return consumers[n - 1]->tally().frames.load() > 5000; }, 30s));

  // 100 SIGHUPs, each with a changed table. The daemon also reloads on its own when it sees
  // the file change (after a quiet moment), so a round may count two reloads: wait for at
  // least one more each time.
  const std::string reloaded = "gatewayd_config_reloads_total{result=\"success\"}";
  for (int round = 1; round <= storm_rounds; ++round) {
    const double before = scrape_metric(gw.metrics_port, reloaded);
    // Replaced atomically, as an editor saves: the daemon also watches the file, and a reload
    // that caught it half-written could apply a smaller (even empty, hence valid) table.
    gw.dir.write("routes.toml.new", storm_routes(n, ports, round));
    std::filesystem::rename(gw.dir.path() / "routes.toml.new", gw.dir.path() / "routes.toml");
    gw.daemon->signal(SIGHUP);
    BOOST_TEST_REQUIRE(
        eventually([&] { return scrape_metric(gw.metrics_port, reloaded) > before; }, 10s),
        "round " << round);
    if (round % 10 == 0) {
      std::uint64_t sent = 0, got = 0;
      for (auto& s : suppliers)
        sent += s->sent();
      for (auto& c : consumers)
        got += c->tally().frames.load();
      BOOST_TEST_MESSAGE("reload storm: round " << round << ": sent " << sent << ", received "
                                                << got);
    }
  }
  const double reloads = scrape_metric(gw.metrics_port, reloaded);
  BOOST_TEST(reloads >= storm_rounds);
  for (auto& s : suppliers)
    s->stop();
  for (unsigned k = 0; k < n; ++k) {
    std::uint64_t expected = 0;
    for (auto& s : suppliers)
      expected += s->sent_to(k);
    const auto& t = consumers[k]->tally();
    BOOST_TEST(eventually([&] { return t.frames.load() == expected; }, 30s), "consumer " << k);
    BOOST_TEST(t.lost.load() == 0u);
    BOOST_TEST(t.duplicated.load() == 0u);
    BOOST_TEST(t.misrouted.load() == 0u);
    BOOST_TEST(t.corrupt.load() == 0u);
    BOOST_TEST_MESSAGE("reload storm: consumer " << k << " got " << t.frames.load()
                                                 << " frames, expected " << expected);
  }
  BOOST_TEST_MESSAGE("reload storm: " << reloads << " successful reloads under traffic");
  {
    std::istringstream in(gw.daemon->log());
    for (std::string line; std::getline(in, line);)
      if (line.find("reloaded") == std::string::npos)
        BOOST_TEST_MESSAGE("reload storm: gatewayd: " << line);
  }
  if (const auto reply = http_get(gw.metrics_port, "/metrics"); reply.status == 200) {
    std::istringstream in(reply.body);
    for (std::string line; std::getline(in, line);)
      if ((line.rfind("gatewayd_consumer_dropped", 0) == 0 ||
           line.rfind("gatewayd_supplier_connections_closed", 0) == 0 ||
           line.rfind("gatewayd_supplier_protocol", 0) == 0 ||
           line.rfind("gatewayd_messages_unroutable", 0) == 0) &&
          line.substr(line.size() - 2) != " 0")
        BOOST_TEST_MESSAGE("reload storm: " << line);
  }
  BOOST_TEST(scrape_metric(gw.metrics_port, "gatewayd_messages_unroutable_total") == 0);
  BOOST_TEST(scrape_metric(gw.metrics_port, "gatewayd_config_reloads_total{result=\"failure\"}") ==
             0);
}
