// A node killed mid-stream loses nothing a confirm-mode supplier sent: two gatewayd behind the
// real HAProxy (etc/haproxy.cfg on loopback ports, PROXY v2, health checks on /readyz), a
// `gateway-peer send --confirm --reconnect` streaming through it; the node carrying the stream
// is SIGKILLed and started again. The sender resends what no node confirmed, through the
// other node: every frame reaches the consumer at least once, duplicates stay within the
// window. `ctest -L scaleout` runs it with the other balancer tests.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tests/support/consumer_groups.hpp"
#include "tests/support/forked_consumer.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/haproxy.hpp"
#include "tests/support/http_get.hpp"
#include "tests/support/peer_tool.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"

using namespace gatewayd::test;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

std::size_t suppliers_on(const gateway_fixture& n) {
  const auto r = http_get(n.metrics_port, "/connz", 2s);
  if (r.status != 200) return 0;
  return json::parse(r.body)["suppliers"]["connections"].size();
}

// Two nodes behind the real HAProxy, each with a consumer `audit` for `orders.>`, and a
// confirm-mode `gateway-peer send --reconnect` through the balancer. By default each node
// dials its own sink as `audit` (the two sinks together are what the consumer received).
struct two_nodes {
  test_consumer sink1, sink2;
  std::vector<std::unique_ptr<gateway_fixture>> nodes;
  temp_dir dir;
  unsigned short front = free_port(), stats = free_port();
  std::unique_ptr<daemon_process> haproxy;

  // `ack`: the sinks acknowledge what they take (the consumer has `ack = true`).
  two_nodes(const std::string& consumer_extra, const std::string& node_extra, bool ack = false)
      : two_nodes(
            node_extra,
            [&](std::size_t i) {
              return consumer_toml("audit", (i == 0 ? sink1 : sink2).endpoint(), consumer_extra);
            },
            [](const gateway_fixture& n) { return n.consumers_connected({"audit"}); }, ack) {}

  // Node i's [consumers.audit] table is `consumer(i)`; `connected(node)` waits until the node
  // has dialled all of it.
  two_nodes(const std::string& node_extra, const std::function<std::string(std::size_t)>& consumer,
            const std::function<bool(const gateway_fixture&)>& connected, bool ack = false) {
    sink1.acknowledge(ack);
    sink2.acknowledge(ack);
    const std::string node =
        "proxy_protocol = true\nproxy_from = [\"127.0.0.1/32\"]\n" + node_extra;
    for (std::size_t i = 0; i < 2; ++i) {
      nodes.push_back(
          std::make_unique<gateway_fixture>(consumer(i) + route_toml("orders.>", {"audit"}), node));
      nodes.back()->keep_ports();
      BOOST_TEST_REQUIRE(connected(*nodes.back()));
    }
    const auto cfg = dir.write("haproxy.cfg", haproxy_config(front, stats, *nodes[0], *nodes[1]));
    haproxy = std::make_unique<daemon_process>(haproxy_binary,
                                               std::vector<std::string>{"-f", cfg.string(), "-db"},
                                               dir.path() / "haproxy.log");
    BOOST_TEST_REQUIRE(eventually([&] { return both_up(); }, 10s), haproxy->log());
  }
  ~two_nodes() {
    haproxy->signal(SIGTERM);
    BOOST_TEST(haproxy->wait_exit(10s).has_value());
  }
  bool both_up() const {
    return server_status(stats, "gw1") == "UP" && server_status(stats, "gw2") == "UP";
  }
  daemon_process send(int rate, std::size_t frames, std::size_t window) const {
    return daemon_process(peer_binary(),
                          {"send", "--to", "127.0.0.1:" + std::to_string(front), "--address",
                           "orders.eu.created", "--size", "64", "--rate", std::to_string(rate),
                           "--count", std::to_string(frames), "--reconnect", "--confirm",
                           "--window", std::to_string(window), "--confirm-wait", "30", "--json"},
                          dir.path() / "send.log");
  }
  // The node carrying the stream, once it has routed `received` frames.
  std::optional<std::size_t> carrier(double received) const {
    std::optional<std::size_t> found;
    eventually(
        [&] {
          for (std::size_t i = 0; i < nodes.size(); ++i) {
            if (suppliers_on(*nodes[i]) == 1 &&
                scrape_metric(nodes[i]->metrics_port,
                              "gatewayd_supplier_messages_received_total") >= received) {
              found = i;
              return true;
            }
          }
          return false;
        },
        20s);
    return found;
  }
};

// The sender's --json summary once it has exited 0, checked: every frame confirmed, none
// rejected or left unconfirmed.
json all_confirmed(daemon_process& sender, std::size_t frames) {
  BOOST_TEST_REQUIRE(sender.wait_exit(60s).value_or(-1) == 0, sender.log());
  const auto report = json::parse(sender.log());
  BOOST_TEST_MESSAGE("gateway-peer send: " << report.dump());
  BOOST_TEST(report["frames"] == frames);
  BOOST_TEST(report["confirmed"] == frames);
  BOOST_TEST(report["unconfirmed"] == 0);
  BOOST_TEST(report["rejected"] == 0);
  return report;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_node_killed_mid_stream_loses_nothing_a_confirm_supplier_sent) {
  BOOST_TEST_REQUIRE(std::filesystem::exists(haproxy_binary), "install Debian's haproxy");
  constexpr std::size_t frames = 12000, window = 1000;
  // One consumer, dialled by each node: each node's connection lands in a sink of its own, and
  // the two together are what the consumer received.
  two_nodes t("queue_capacity = 100000", "");
  test_consumer &sink1 = t.sink1, &sink2 = t.sink2;
  auto& nodes = t.nodes;
  daemon_process sender = t.send(3000, frames, window);
  // Mid-stream: the node carrying the stream has routed a few thousand frames.
  const auto victim = t.carrier(3000);
  BOOST_TEST_REQUIRE(victim.has_value());
  auto& n = *nodes[*victim];
  n.daemon->signal(SIGKILL);
  BOOST_TEST_REQUIRE(n.daemon->wait_exit(10s).has_value());
  n.restart("gw-again.log");
  BOOST_TEST_REQUIRE(n.consumers_connected({"audit"}));
  BOOST_TEST_REQUIRE(eventually([&] { return t.both_up(); }, 10s), t.haproxy->log());

  const auto report = all_confirmed(sender, frames);
  BOOST_TEST(report["reconnects"] >= 1);
  BOOST_TEST(report["resent"] <= static_cast<long long>(window));

  // Every frame confirmed was handed to a consumer socket: each payload (unique per frame:
  // send time, sequence) is in one sink or the other, some twice (a resend), none missing.
  const auto tally = [&](std::size_t& total) {
    std::map<std::string, int> seen;
    total = 0;
    for (const test_consumer* s : {&sink1, &sink2}) {
      for (const auto& f : s->frames()) {
        ++seen[f.payload];
        ++total;
      }
    }
    return seen;
  };
  std::size_t total = 0;
  BOOST_TEST_REQUIRE(eventually([&] { return tally(total).size() == frames; }, 20s));
  const auto seen = tally(total);
  BOOST_TEST(seen.size() == frames);  // lost: 0
  const std::size_t duplicates = total - seen.size();
  BOOST_TEST_MESSAGE("delivered " << total << " for " << frames << " sent: " << duplicates
                                  << " duplicates (window " << window << ")");
  BOOST_TEST(duplicates <= window);
  for (const auto& [payload, times] : seen)
    BOOST_TEST_REQUIRE(times <= 2);
  BOOST_TEST(sink1.corruptions() + sink2.corruptions() == 0u);
}

// Issue 29, item 3: a graceful stop gives up nothing a SIGKILL would keep. The `ack = true`
// consumer of the node carrying a `send --confirm --reconnect` stream stops acknowledging (it
// stops reading: what the node wrote waits unacknowledged, the rest queued), and that node gets
// SIGTERM with a short drain. A stop never rejects: what did not settle within the drain stays
// unsettled, the node closes the supplier's connection, and the supplier resends it through the
// other node. Then the consumer resumes. 0 lost, 0 rejected (reason 4 before the fix).
BOOST_AUTO_TEST_CASE(a_graceful_stop_rejects_nothing_and_loses_nothing) {
  BOOST_TEST_REQUIRE(std::filesystem::exists(haproxy_binary), "install Debian's haproxy");
  constexpr std::size_t frames = 3000, window = 500;
  two_nodes t("ack = true\nmax_unacked_bytes = 16384\nqueue_capacity = 100000",
              "drain_timeout_ms = 1000\n", true);
  test_consumer &sink1 = t.sink1, &sink2 = t.sink2;
  daemon_process sender = t.send(5000, frames, window);
  const auto victim = t.carrier(300);
  BOOST_TEST_REQUIRE(victim.has_value());
  auto& n = *t.nodes[*victim];
  test_consumer& stalled = *victim == 0 ? sink1 : sink2;
  stalled.stall(true);
  // The supplier's whole window waits on the stalled consumer: some written to it and not
  // acknowledged (max_unacked_bytes), the rest queued.
  BOOST_TEST_REQUIRE(eventually(
      [&] {
        return scrape_metric(n.metrics_port, "gatewayd_supplier_unconfirmed_frames") >=
               static_cast<double>(window);
      },
      20s));
  BOOST_TEST_MESSAGE("held unacknowledged: "
                     << scrape_metric(n.metrics_port,
                                      "gatewayd_consumer_unacked_frames{consumer=\"audit\"}")
                     << ", queued: "
                     << scrape_metric(n.metrics_port,
                                      "gatewayd_consumer_queue_depth{consumer=\"audit\"}"));
  n.daemon->signal(SIGTERM);
  BOOST_TEST_REQUIRE(n.daemon->wait_exit(10s).has_value());
  stalled.stall(false);  // the consumer resumes (its node is gone: the other one resends)

  BOOST_TEST_REQUIRE(sender.wait_exit(60s).value_or(-1) == 0, sender.log());
  const auto report = json::parse(sender.log());
  BOOST_TEST_MESSAGE("gateway-peer send: " << report.dump());
  BOOST_TEST(report["rejected"] == 0);  // reason 4 among them before the fix
  BOOST_TEST(report["rejected_by_reason"]["removed"] == 0);
  BOOST_TEST(report["confirmed"] == frames);
  BOOST_TEST(report["unconfirmed"] == 0);
  BOOST_TEST(report["reconnects"] >= 1);
  BOOST_TEST(n.daemon->log().find("undelivered") != std::string::npos);

  std::set<std::string> seen;
  const auto tally = [&] {
    seen.clear();
    for (const test_consumer* s : {&sink1, &sink2}) {
      for (const auto& f : s->frames())
        seen.insert(f.payload);
    }
    return seen.size() == frames;
  };
  BOOST_TEST(eventually(tally, 20s));
  BOOST_TEST(seen.size() == frames);  // lost: 0
  BOOST_TEST(sink1.corruptions() + sink2.corruptions() == 0u);
}

// Issue 32, test 4 behind the balancer: both nodes have `audit` as an `ack = true` group over
// the same three members, a confirm-mode supplier streams through HAProxy, and the member that
// stopped reading (and acknowledging) with frames written to it is SIGKILLed mid-stream. The
// node carrying the stream hands what that member held, unacknowledged frames included, to the
// other two, within consumer_timeout_ms + 1 s; each CONFIRM frame stays owed until one of them
// acknowledges it: every frame confirmed, none rejected, none lost.
BOOST_AUTO_TEST_CASE(a_killed_ack_group_member_loses_no_confirmed_frame) {
  BOOST_TEST_REQUIRE(std::filesystem::exists(haproxy_binary), "install Debian's haproxy");
  constexpr std::size_t frames = 6000, window = 1000;
  constexpr int consumer_timeout_ms = 2000;
  // It reads (and acknowledges) 300 frames, then hangs; the other two acknowledge all.
  forked_ack_member killed(300), b, c;
  const std::vector<std::string> members{killed.endpoint(), b.endpoint(), c.endpoint()};
  two_nodes t(
      "slow_consumer_ms = 60000\nconsumer_timeout_ms = " + std::to_string(consumer_timeout_ms),
      [&](std::size_t) {
        return group_toml("audit", members, "ack = true\nqueue_capacity = 100000");
      },
      [&](const gateway_fixture& n) { return members_connected(n, "audit", members); });
  daemon_process sender = t.send(3000, frames, window);
  BOOST_TEST_REQUIRE(eventually([&] { return killed.stalled(); }, 20s), sender.log());
  const auto carrier = t.carrier(1);
  BOOST_TEST_REQUIRE(carrier.has_value());
  const auto& n = *t.nodes[*carrier];
  const auto series = [&](const std::string& metric) {
    return scrape_metric(n.metrics_port, member_series(metric, "audit", killed.endpoint()));
  };
  // Written to it since it hung, never to be acknowledged: a good part of the window.
  BOOST_TEST_REQUIRE(
      eventually([&] { return series("gatewayd_consumer_unacked_frames") >= 100; }, 10s));
  const double held = series("gatewayd_consumer_unacked_frames");
  BOOST_TEST_MESSAGE("the member killed holds "
                     << held << " unacknowledged, " << series("gatewayd_consumer_queue_depth")
                     << " queued; it read " << killed.sequences().size());
  const auto max_of = [](const std::vector<std::uint64_t>& seqs) {
    return seqs.empty() ? 0 : *std::max_element(seqs.begin(), seqs.end());
  };
  killed.kill();
  const auto t0 = std::chrono::steady_clock::now();
  // Every frame up to the newest the others had got when it died was routed before the kill.
  const std::uint64_t routed = std::max(max_of(b.sequences()), max_of(c.sequences()));
  std::set<std::uint64_t> seen;
  std::size_t total = 0;
  const auto tally = [&] {
    seen.clear();
    total = 0;
    for (const forked_ack_member* m : {&killed, &b, &c}) {
      for (const auto seq : m->sequences()) {
        seen.insert(seq);
        ++total;
      }
    }
  };
  const auto up_to_routed = [&] {
    tally();
    return std::distance(seen.begin(), seen.upper_bound(routed)) ==
           static_cast<std::ptrdiff_t>(routed + 1);
  };
  const auto bound = std::chrono::milliseconds(consumer_timeout_ms + 1000) * peer_slowdown();
  const bool handed_over = eventually(up_to_routed, bound + 2s);
  const auto took = std::chrono::steady_clock::now() - t0;
  up_to_routed();
  BOOST_TEST_MESSAGE(
      "frames 0.." << routed << " (routed before the kill): "
                   << std::distance(seen.begin(), seen.upper_bound(routed)) << " delivered "
                   << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                   << " ms after the kill");
  BOOST_TEST(handed_over);
  BOOST_TEST(took <= bound);

  const auto report = all_confirmed(sender, frames);

  // Each confirmed frame reached a member: the killed one before it hung, or one of the others.
  BOOST_TEST_REQUIRE(eventually(
      [&] {
        tally();
        return seen.size() >= frames;
      },
      10s));
  BOOST_TEST(seen.size() == frames);  // lost: 0
  BOOST_TEST(*seen.rbegin() == frames - 1);
  // A duplicate is a frame the killed member read whose acknowledgement the node had not
  // seen (or a supplier's resend): never more than it read.
  const std::size_t duplicates = total - seen.size();
  const std::size_t read_by_killed = killed.sequences().size();
  BOOST_TEST_MESSAGE("delivered " << total << " for " << frames << " sent: " << duplicates
                                  << " duplicates; the killed member read " << read_by_killed);
  BOOST_TEST(duplicates <= read_by_killed + report["resent"].get<std::size_t>());
  BOOST_TEST(scrape_metric(n.metrics_port, member_series("gatewayd_consumer_handovers_total",
                                                         "audit", killed.endpoint())) >= 1);
  // What it held went to the others: its unacknowledged frames at least.
  const double given = scrape_metric(
      n.metrics_port, "gatewayd_consumer_handover_frames_total{consumer=\"audit\",member=\"" +
                          killed.endpoint() + "\",direction=\"given\"}");
  BOOST_TEST_MESSAGE("handed over " << given);
  BOOST_TEST(given >= held);
  for (const forked_ack_member* m : {&killed, &b, &c}) {
    BOOST_TEST(m->corruptions() == 0u);
    BOOST_TEST(!m->overflowed());
  }
}
