// Faults of the network on the supplier leg (issue 33, shape 3): a confirm-mode
// `gateway-peer send --reconnect --to A,B` on a host of its own (a network namespace) is cut
// off from node A (every packet to and from A's listener dropped, no RST) while CONFIRM frames
// are in flight. Node A closes the dead session within its bound (idle_timeout_ms once what it
// read is settled) and delivers what it had read; the sender, hearing no confirm for its
// --confirm-deadline, drops the connection and resends what A never confirmed through B. Each
// node has an `ack = true` consumer and a plain one: 0 lost at either, duplicates within the
// window.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "tests/support/gateway_fixture.hpp"
#include "tests/support/haproxy.hpp"
#include "tests/support/netns.hpp"
#include "tests/support/peer_tool.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"

using namespace gatewayd::test;
using json = nlohmann::json;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

double since_ms(clock_type::time_point t) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t).count();
}

constexpr int idle_timeout_ms = 2000;
constexpr double confirm_deadline_s = 1.0;

// One node: its `ack = true` consumer and its plain one on loopback, listening for suppliers on
// `listen` (the veth address the supplier's host reaches it by).
struct node {
  test_consumer acked, plain;
  std::unique_ptr<gateway_fixture> gw;
  explicit node(const std::string& listen, const std::string& proxy_source = "") {
    acked.acknowledge(true);
    std::string extra = "supplier_listen = \"" + listen +
                        ":0\"\nidle_timeout_ms = " + std::to_string(idle_timeout_ms) + "\n";
    std::string tables;
    if (!proxy_source.empty()) {
      extra += "proxy_protocol = true\nproxy_from = [\"" + proxy_source + "/32\"]\n";
      tables = "[metrics]\nlisten = \"" + listen + ":0\"\nallow = [\"127.0.0.0/8\", \"" +
               proxy_source + "/32\"]\n";
    }
    gw = std::make_unique<gateway_fixture>(
        consumer_toml("acked", acked.endpoint(), "ack = true\nqueue_capacity = 100000") +
            consumer_toml("plain", plain.endpoint(), "queue_capacity = 100000") +
            route_toml("orders.>", {"acked", "plain"}),
        extra, std::vector<std::string>{}, true, tables);
  }
  double metric(const std::string& series) const { return scrape_metric(gw->metrics_port, series); }
  double received() const { return metric("gatewayd_supplier_messages_received_total"); }
};

// Every payload (unique per frame: send time, sequence, sender) the two sinks got together.
struct tally {
  std::map<std::string, int> seen;
  std::size_t delivered = 0;
  std::size_t duplicates() const { return delivered - seen.size(); }
};
tally count(const test_consumer& a, const test_consumer& b) {
  tally t;
  for (const test_consumer* c : {&a, &b}) {
    for (const auto& f : c->frames()) {
      ++t.seen[f.payload];
      ++t.delivered;
    }
  }
  return t;
}

// A confirm-mode `gateway-peer send --reconnect` on `host` to `to`, at 4,000 frames/s, that
// leaves a connection whose confirms stop for confirm_deadline_s.
daemon_process& start_confirm_sender(netns_host& host, const std::string& to, std::size_t frames,
                                     std::size_t window, const temp_dir& dir) {
  return host.start(peer_binary(),
                    {"send",
                     "--to",
                     to,
                     "--address",
                     "orders.eu.created",
                     "--size",
                     "64",
                     "--rate",
                     "4000",
                     "--count",
                     std::to_string(frames),
                     "--confirm",
                     "--reconnect",
                     "--window",
                     std::to_string(window),
                     "--confirm-deadline",
                     std::to_string(confirm_deadline_s),
                     "--confirm-wait",
                     "30",
                     "--json"},
                    dir.path() / "send.log");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(network_faults, *boost::unit_test::precondition(namespaces_available))

BOOST_AUTO_TEST_CASE(a_supplier_cut_off_from_its_node_moves_on_and_loses_nothing) {
  constexpr std::size_t frames = 12000, window = 1000;
  netns_host host;
  node a(host.outer_address()), b(host.outer_address());
  temp_dir dir;
  const std::string to = host.outer_address() + ":" + std::to_string(a.gw->supplier_port) + "," +
                         host.outer_address() + ":" + std::to_string(b.gw->supplier_port);
  daemon_process& sender = start_confirm_sender(host, to, frames, window, dir);
  // Mid-stream on A (the first address).
  BOOST_TEST_REQUIRE(eventually([&] { return a.received() >= 2000; }, 10s), sender.log());
  const auto start = clock_type::now();
  host.partition_from({a.gw->supplier_port});

  // The sender moves to B after its confirm deadline.
  BOOST_TEST_REQUIRE(eventually([&] { return b.received() > 0; }, 10s), sender.log());
  const double moved_ms = since_ms(start);
  BOOST_TEST(moved_ms <= confirm_deadline_s * 1000 + 1000);
  // A closes the dead session once what it read is settled and the connection idle.
  const auto closed = [&] {
    return a.metric("gatewayd_supplier_connections_closed_total{reason=\"idle_timeout\"}");
  };
  BOOST_TEST_REQUIRE(eventually([&] { return closed() >= 1; }, 10s));
  const double closed_ms = since_ms(start);
  BOOST_TEST(closed_ms <= idle_timeout_ms + 1000);
  host.heal();

  BOOST_TEST_REQUIRE(sender.wait_exit(60s).value_or(-1) == 0, sender.log());
  const auto report = json::parse(sender.log());
  // Confirmed means handed to the plain consumer's socket: it may still be reading.
  eventually([&] { return count(a.plain, b.plain).seen.size() >= frames; }, 10s);
  const tally acked = count(a.acked, b.acked), plain = count(a.plain, b.plain);
  BOOST_TEST_MESSAGE(
      "supplier cut off from its node: sent "
      << report["frames"] << ", confirmed " << report["confirmed"] << ", resent "
      << report["resent"] << ", reconnects " << report["reconnects"] << "; ack consumer: delivered "
      << acked.delivered << ", duplicates " << acked.duplicates() << ", lost after confirm "
      << frames - acked.seen.size() << "; plain: delivered " << plain.delivered << ", duplicates "
      << plain.duplicates() << ", lost " << frames - plain.seen.size() << "; sender moved after "
      << moved_ms << " ms, node A closed the session after " << closed_ms << " ms (A routed "
      << a.received() << ", B " << b.received() << ")");
  BOOST_TEST(report["frames"] == frames);
  BOOST_TEST(report["confirmed"] == frames);
  BOOST_TEST(report["rejected"] == 0);
  BOOST_TEST(report["reconnects"] >= 1);
  BOOST_TEST(report["resent"] <= static_cast<long long>(window));
  BOOST_TEST(acked.seen.size() == frames);  // 0 lost after confirm
  BOOST_TEST(plain.seen.size() == frames);
  BOOST_TEST(acked.duplicates() <= window);
  BOOST_TEST(plain.duplicates() <= window);
  for (const test_consumer* c : {&a.acked, &a.plain, &b.acked, &b.plain})
    BOOST_TEST(c->corruptions() == 0u);
}

// Shape 5: HAProxy and the supplier on one host, the two nodes beside it; node A is cut off
// from that host (its listener and its /readyz both): HAProxy's check marks it DOWN, the
// supplier's confirm deadline drops the stream stuck on A, and HAProxy sends its next
// connection to B. What A read is delivered by A; what A never confirmed is resent via B.
BOOST_AUTO_TEST_CASE(a_node_cut_off_from_haproxy_and_its_suppliers_loses_nothing) {
  BOOST_TEST_REQUIRE(std::filesystem::exists(haproxy_binary), "install Debian's haproxy");
  constexpr std::size_t frames = 12000, window = 1000;
  netns_host host;
  node a(host.outer_address(), host.address()), b(host.outer_address(), host.address());
  temp_dir dir;
  const unsigned short front = free_port(), stats = free_port();
  std::string cfg = haproxy_config(front, stats, *a.gw, *b.gw);
  for (const node* n : {&a, &b}) {
    replace_all(cfg, "127.0.0.1:" + std::to_string(n->gw->supplier_port) + " check",
                host.outer_address() + ":" + std::to_string(n->gw->supplier_port) + " check");
  }
  daemon_process& haproxy =
      host.start(haproxy_binary, {"-f", dir.write("haproxy.cfg", cfg).string(), "-db"},
                 dir.path() / "haproxy.log");
  // The stats page listens on the host's loopback: asked from a thread in the namespace.
  const auto status = [&](const std::string& server) {
    std::string s;
    host.run([&] { s = server_status(stats, server); });
    return s;
  };
  BOOST_TEST_REQUIRE(
      eventually([&] { return status("gw1") == "UP" && status("gw2") == "UP"; }, 10s),
      "gw1 " << status("gw1") << ", gw2 " << status("gw2") << ": " << haproxy.log());
  daemon_process& sender =
      start_confirm_sender(host, "127.0.0.1:" + std::to_string(front), frames, window, dir);
  // Mid-stream: whichever node HAProxy picked has delivered a few thousand frames.
  BOOST_TEST_REQUIRE(
      eventually([&] { return a.plain.count() >= 2000 || b.plain.count() >= 2000; }, 10s),
      sender.log());
  node& victim = a.plain.count() >= 2000 ? a : b;
  node& other = &victim == &a ? b : a;
  const std::string victim_name = &victim == &a ? "gw1" : "gw2";
  const std::size_t other_before = other.plain.count();
  const auto start = clock_type::now();
  host.partition_from({victim.gw->supplier_port, victim.gw->metrics_port});
  BOOST_TEST_REQUIRE(eventually([&] { return status(victim_name) == "DOWN"; }, 10s));
  const double down_ms = since_ms(start);
  BOOST_TEST_REQUIRE(eventually([&] { return other.plain.count() > other_before; }, 10s),
                     sender.log());
  const double moved_ms = since_ms(start);
  // Checks every 100 ms, DOWN after 2 failed ones (each bounded by the check's own timeout).
  BOOST_TEST(down_ms <= 1500);
  BOOST_TEST(moved_ms <= confirm_deadline_s * 1000 + 1000);
  host.heal();

  BOOST_TEST_REQUIRE(sender.wait_exit(60s).value_or(-1) == 0, sender.log());
  const auto report = json::parse(sender.log());
  eventually([&] { return count(a.plain, b.plain).seen.size() >= frames; }, 10s);
  eventually([&] { return count(a.acked, b.acked).seen.size() >= frames; }, 10s);
  const tally acked = count(a.acked, b.acked), plain = count(a.plain, b.plain);
  BOOST_TEST_MESSAGE("node cut off from HAProxy and its suppliers: sent "
                     << report["frames"] << ", confirmed " << report["confirmed"] << ", resent "
                     << report["resent"] << ", reconnects " << report["reconnects"]
                     << "; ack consumer: delivered " << acked.delivered << ", duplicates "
                     << acked.duplicates() << ", lost after confirm " << frames - acked.seen.size()
                     << "; plain: delivered " << plain.delivered << ", duplicates "
                     << plain.duplicates() << ", lost " << frames - plain.seen.size()
                     << "; HAProxy marked it DOWN after " << down_ms
                     << " ms, the stream reached the other node after " << moved_ms << " ms");
  BOOST_TEST(report["confirmed"] == frames);
  BOOST_TEST(report["rejected"] == 0);
  BOOST_TEST(report["reconnects"] >= 1);
  BOOST_TEST(report["resent"] <= static_cast<long long>(window));
  BOOST_TEST(acked.seen.size() == frames);  // 0 lost after confirm
  BOOST_TEST(plain.seen.size() == frames);
  BOOST_TEST(acked.duplicates() <= window);
  BOOST_TEST(plain.duplicates() <= window);
}

BOOST_AUTO_TEST_SUITE_END()
