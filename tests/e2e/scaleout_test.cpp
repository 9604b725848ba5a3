// Scale-out with the real balancer: Debian's HAProxy, run on the sample etc/haproxy.cfg (pointed
// at loopback ports), in front of two gatewayd with the same routes, PROXY protocol v2 and
// health checks on /readyz. A supplier (gateway-peer send) streams through HAProxy while each
// node in turn is stopped (lame duck, suppliers asked to leave, drain) and started again; two
// receivers (gateway-peer recv) accept a connection from each node. Every frame sent is
// received by the nodes, and delivered or counted as dropped; with consumers that keep up,
// nothing is lost and each supplier connection's frames arrive in order.
// `ctest -L scaleout` runs it alone.
#include <boost/test/unit_test.hpp>

#include <csignal>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

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

const std::vector<std::string> consumers = {"billing", "audit"};

// What one gatewayd process counted in its life, from the totals it logs as it exits (no
// scrape can read them once it is gone).
struct incarnation_counts {
  double received = -1;
  std::map<std::string, double> sent, dropped;  // by consumer
};

incarnation_counts totals_in(const std::string& log) {
  incarnation_counts c;
  std::smatch m;
  if (std::regex_search(log, m, std::regex(R"(totals: ([0-9]+) frames received from suppliers)")))
    c.received = std::stod(m[1]);
  const std::regex consumer(R"(totals: consumer ([\w-]+) sent ([0-9]+) frames, dropped ([0-9]+))");
  for (std::sregex_iterator it(log.begin(), log.end(), consumer), end; it != end; ++it) {
    c.sent[(*it)[1]] = std::stod((*it)[2]);
    c.dropped[(*it)[1]] = std::stod((*it)[3]);
  }
  return c;
}

void add_peers(const gateway_fixture& n, std::set<std::string>& peers) {
  const auto connz = json::parse(http_get(n.metrics_port, "/connz", 2s).body);
  for (const auto& c : connz["suppliers"]["connections"])
    peers.insert(c["peer"].get<std::string>());
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_rolling_restart_behind_haproxy_loses_nothing) {
  BOOST_TEST_REQUIRE(std::filesystem::exists(haproxy_binary), "install Debian's haproxy");
  // The sample as shipped is a valid configuration.
  const auto sample =
      run_command(haproxy_binary, {"-c", "-f", GATEWAYD_SOURCE_DIR "/etc/haproxy.cfg"});
  BOOST_TEST_REQUIRE(sample.exit_code == 0, sample.out << sample.err);

  // 36,000 frames at 3,000/s: 12 s of traffic, room for two restarts of a few seconds each.
  constexpr long long frames = 36000;
  temp_dir dir;
  std::map<std::string, std::unique_ptr<peer_receiver>> receivers;
  std::string routes;
  for (const auto& name : consumers) {
    receivers[name] = std::make_unique<peer_receiver>(
        dir, name,
        std::vector<std::string>{"--expect", std::to_string(frames), "--duration", "40", "--json"});
    routes += consumer_toml(name, receivers[name]->endpoint(), "queue_capacity = 100000");
  }
  routes += route_toml("orders.>", consumers);
  // lame_duck_ms above HAProxy's inter x fall (100 ms x 2), as docs/scaling.md says.
  const std::string node =
      "lame_duck_ms = 1000\ndrain_timeout_ms = 4000\nproxy_protocol = true\n"
      "proxy_from = [\"127.0.0.1/32\"]\n";
  std::vector<std::unique_ptr<gateway_fixture>> nodes;
  for (int i = 0; i < 2; ++i) {
    nodes.push_back(std::make_unique<gateway_fixture>(routes, node));
    nodes.back()->keep_ports();
    BOOST_TEST_REQUIRE(nodes.back()->consumers_connected(consumers));
  }

  const unsigned short front = free_port(), stats = free_port();
  const auto cfg = dir.write("haproxy.cfg", haproxy_config(front, stats, *nodes[0], *nodes[1]));
  const auto check = run_command(haproxy_binary, {"-c", "-f", cfg.string()});
  BOOST_TEST_REQUIRE(check.exit_code == 0, check.out << check.err);
  daemon_process haproxy(haproxy_binary, {"-f", cfg.string(), "-db"}, dir.path() / "haproxy.log");
  const auto both_up = [&] {
    return server_status(stats, "gw1") == "UP" && server_status(stats, "gw2") == "UP";
  };
  BOOST_TEST_REQUIRE(eventually(both_up, 10s), haproxy.log());

  daemon_process sender(peer_binary(),
                        {"send", "--to", "127.0.0.1:" + std::to_string(front), "--address",
                         "orders.eu.created,orders.us.created", "--rate", "3000", "--count",
                         std::to_string(frames), "--reconnect", "--json"},
                        dir.path() / "send.log");
  std::vector<incarnation_counts> counted;
  std::set<std::string> peers_seen;  // as /connz names them: through the PROXY header
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    auto& n = *nodes[i];
    const std::string name = "gw" + std::to_string(i + 1);
    std::this_thread::sleep_for(2s);
    for (const auto& each : nodes)
      add_peers(*each, peers_seen);
    const auto sigterm = std::chrono::steady_clock::now();
    n.daemon->signal(SIGTERM);
    // The lame duck: HAProxy's check sees 503 and takes the node out before it stops accepting.
    BOOST_TEST(eventually([&] { return server_status(stats, name) == "DOWN"; }, 5s));
    const auto out_after = std::chrono::steady_clock::now() - sigterm;
    BOOST_TEST_MESSAGE("HAProxy took " << name << " out "
                                       << std::chrono::duration<double>(out_after).count()
                                       << " s after its SIGTERM");
    BOOST_TEST(out_after < 1000ms);
    BOOST_TEST(n.daemon->count_in_log("lame duck over") == 0u);
    // Then its suppliers are asked to leave, leave at once, and the drain finds nothing left.
    BOOST_TEST_REQUIRE(n.daemon->wait_exit(10s).value_or(-1) == 0, n.daemon->log());
    BOOST_TEST(n.daemon->count_in_log("every supplier left") == 1u, n.daemon->log());
    BOOST_TEST(n.daemon->count_in_log("drain finished: 0 frames undelivered") == 1u);
    counted.push_back(totals_in(n.daemon->log()));
    n.restart(name + "-again.log");
    BOOST_TEST_REQUIRE(n.consumers_connected(consumers));
    BOOST_TEST_REQUIRE(eventually(both_up, 5s));
  }
  BOOST_TEST_REQUIRE(sender.wait_exit(20s).value_or(-1) == 0, sender.log());
  const auto report = json::parse(sender.log());
  BOOST_TEST_MESSAGE("gateway-peer send: " << report.dump());

  // The receivers end once every frame arrived (or fail after 40 s); then the nodes running
  // now are stopped too, and say what they counted.
  for (auto& [name, r] : receivers)
    BOOST_TEST(r->process->wait_exit(40s).value_or(-1) == 0, r->process->log());
  for (const auto& n : nodes) {
    add_peers(*n, peers_seen);
    n->daemon->signal(SIGTERM);
    BOOST_TEST_REQUIRE(n->daemon->wait_exit(10s).value_or(-1) == 0, n->daemon->log());
    counted.push_back(totals_in(n->daemon->log()));
  }
  const double sent = report["frames"];
  haproxy.signal(SIGTERM);
  BOOST_TEST(haproxy.wait_exit(10s).has_value());

  // The sender moved twice, each time because a stopping node asked it to, and re-sent nothing.
  BOOST_TEST(report["asked_to_leave"] == 2);
  BOOST_TEST(report["lost"] == 0);
  BOOST_TEST(report["resent"] == 0);
  BOOST_TEST(sent == frames);
  // Every frame sent was received by one node or the other.
  double received = 0;
  for (const auto& c : counted)
    received += c.received;
  BOOST_TEST(received == sent);
  // The nodes saw the supplier's own address (HAProxy's PROXY header), never HAProxy's.
  std::set<std::string> froms;
  for (const auto& l : report["links"])
    froms.insert(l["from"].get<std::string>());
  BOOST_TEST(!peers_seen.empty());
  for (const auto& p : peers_seen)
    BOOST_TEST(froms.count(p) == 1u, p << " is not one of the sender's connections");
  // Every frame reached each consumer or was counted as dropped; with consumers that keep up,
  // none was dropped, and each connection's frames arrived once, in order.
  for (const auto& name : consumers) {
    double dropped = 0, sent_by_nodes = 0;
    for (const auto& c : counted) {
      dropped += c.dropped.count(name) ? c.dropped.at(name) : -1;
      sent_by_nodes += c.sent.count(name) ? c.sent.at(name) : -1;
    }
    const auto log = receivers[name]->process->log();
    const double delivered = static_cast<double>(json_field(log, "frames"));
    BOOST_TEST_CONTEXT("consumer " << name) {
      BOOST_TEST(delivered + dropped == sent, log);
      BOOST_TEST(sent_by_nodes == delivered);
      BOOST_TEST(dropped == 0);
      BOOST_TEST(json_field(log, "lost") == 0);
      BOOST_TEST(json_field(log, "reordered") == 0);
      BOOST_TEST(json_field(log, "duplicated") == 0);
      BOOST_TEST(json_field(log, "corrupt") == 0);
      // One stream per address and supplier connection: a connection is a sender of its own.
      BOOST_TEST(json_field(log, "streams") == 2 * static_cast<long long>(report["links"].size()));
    }
  }
  std::ostringstream per_node;
  for (auto& c : counted) {
    per_node << " [received " << c.received;
    for (const auto& name : consumers)
      per_node << ", " << name << " sent " << c.sent[name] << " dropped " << c.dropped[name];
    per_node << "]";
  }
  BOOST_TEST_MESSAGE("sent " << sent << "; per node incarnation (gw1, gw2, gw1 again, gw2 again):"
                             << per_node.str());
}
