// gateway-peer end to end: the real tool's binaries against the real gatewayd on 127.0.0.1.
#include <boost/test/unit_test.hpp>

#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "tests/support/gateway_fixture.hpp"
#include "tests/support/peer_tool.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"

using namespace gatewayd::test;
using namespace std::chrono_literals;

namespace {

const std::string& peer = peer_binary();

// Bytes received and not yet read on the established TCP connections whose local port is
// `port` (the Recv-Q of ss), from /proc/net/tcp and tcp6.
std::uint64_t unread_bytes_at(unsigned short port) {
  std::uint64_t total = 0;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues;
      fields >> slot >> local >> remote >> state >> queues;
      const auto colon = local.rfind(':');
      if (state != "01" || colon == std::string::npos) continue;  // 01: established
      if (std::stoul(local.substr(colon + 1), nullptr, 16) != port) continue;
      total += std::stoull(queues.substr(queues.find(':') + 1), nullptr, 16);
    }
  }
  return total;
}

}  // namespace

BOOST_AUTO_TEST_CASE(sent_frames_all_arrive_in_order_without_loss) {
  temp_dir dir;
  constexpr int n = 20000;
  peer_receiver recv(dir, "recv", {"--expect", std::to_string(n), "--duration", "60", "--json"});
  gateway_fixture gw(consumer_toml("sink", recv.endpoint(), "queue_capacity = 100000") +
                     route_toml("bench.>", {"sink"}));
  BOOST_TEST_REQUIRE(gw.consumers_connected({"sink"}));
  const auto sent = run_command(
      peer,
      {"send", "--to", "127.0.0.1:" + std::to_string(gw.supplier_port), "--address", "bench.one",
       "--size", "200", "--count", std::to_string(n), "--connections", "2", "--json"},
      60s);
  BOOST_TEST(sent.exit_code == 0, sent.err);
  BOOST_TEST(json_field(sent.out, "frames") == n);
  const auto code = recv.process->wait_exit(60s);
  BOOST_TEST_REQUIRE(code.has_value(), "receiver did not finish: " << recv.process->log());
  BOOST_TEST(*code == 0, recv.process->log());
  const auto log = recv.process->log();
  BOOST_TEST(json_field(log, "frames") == n);
  BOOST_TEST(json_field(log, "bytes") == n * (10 + 9 + 200));
  BOOST_TEST(json_field(log, "lost") == 0);
  BOOST_TEST(json_field(log, "duplicated") == 0);
  BOOST_TEST(json_field(log, "reordered") == 0);
  BOOST_TEST(json_field(log, "corrupt") == 0);
  BOOST_TEST(json_field(log, "count") == n);  // every frame was timed
}

// Mixed addresses: each connection sends frame i to the i-th address in turn, and each
// consumer checks the order of what it got per (sender, stream) with nothing lost.
BOOST_AUTO_TEST_CASE(mixed_addresses_are_numbered_and_verified_per_consumer) {
  temp_dir dir;
  constexpr int consumers = 4, connections = 2, per_stream = 3000;
  constexpr int n = consumers * connections * per_stream;
  std::vector<std::unique_ptr<peer_receiver>> recv;
  std::string routes, addresses;
  for (int c = 1; c <= consumers; ++c) {
    std::string name = "c";  // piecewise: GCC 12 warns falsely (-Wrestrict) on chained operator+
    name += std::to_string(c);
    std::string address = "mix.";
    address += name;
    recv.push_back(std::make_unique<peer_receiver>(
        dir, name,
        std::vector<std::string>{"--expect", std::to_string(n / consumers), "--duration", "60",
                                 "--json"}));
    routes += consumer_toml(name, recv.back()->endpoint(), "queue_capacity = 100000") +
              route_toml(address, {name});
    if (c > 1) addresses += ',';
    addresses += address;
  }
  gateway_fixture gw(routes);
  BOOST_TEST_REQUIRE(gw.consumers_connected({"c1", "c2", "c3", "c4"}));
  const auto sent = run_command(
      peer,
      {"send", "--to", "127.0.0.1:" + std::to_string(gw.supplier_port), "--address", addresses,
       "--count", std::to_string(n), "--connections", std::to_string(connections), "--json"},
      60s);
  BOOST_TEST_REQUIRE(sent.exit_code == 0, sent.err);
  BOOST_TEST(json_field(sent.out, "frames") == n);
  for (auto& r : recv) {
    const auto code = r->process->wait_exit(60s);
    BOOST_TEST_REQUIRE(code.has_value(), "receiver did not finish: " << r->process->log());
    BOOST_TEST(*code == 0, r->process->log());
    const auto log = r->process->log();
    BOOST_TEST(json_field(log, "frames") == n / consumers, log);
    BOOST_TEST(json_field(log, "streams") == connections, log);  // (sender, this address)
    BOOST_TEST(json_field(log, "lost") == 0);
    BOOST_TEST(json_field(log, "reordered") == 0);
    BOOST_TEST(json_field(log, "duplicated") == 0);
    BOOST_TEST(json_field(log, "corrupt") == 0);
  }
}

BOOST_AUTO_TEST_CASE(print_shows_address_size_and_a_printable_preview) {
  temp_dir dir;
  peer_receiver recv(dir, "recv", {"--print", "--expect", "3", "--duration", "60"});
  gateway_fixture gw(consumer_toml("billing", recv.endpoint()) +
                     route_toml("orders.*.created", {"billing"}));
  BOOST_TEST_REQUIRE(gw.consumers_connected({"billing"}));
  const auto sent =
      run_command(peer, {"send", "--to", "127.0.0.1:" + std::to_string(gw.supplier_port),
                         "--address", "orders.eu.created", "--count", "3", "--size", "40"});
  BOOST_TEST(sent.exit_code == 0, sent.err);
  BOOST_TEST(sent.out.find("sent 3 frames") != std::string::npos, sent.out);
  const auto code = recv.process->wait_exit(60s);
  BOOST_TEST_REQUIRE(code.has_value());
  BOOST_TEST(*code == 0, recv.process->log());
  BOOST_TEST(recv.process->count_in_log("orders.eu.created  40 B  \"") == 3u, recv.process->log());
  BOOST_TEST(recv.process->count_in_log("hello from gateway-peer") == 3u);
  BOOST_TEST(recv.process->count_in_log("received 3 frames") == 1u);
  // Only printable characters reach the terminal.
  for (char ch : recv.process->log())
    BOOST_TEST_REQUIRE((ch == '\n' || (ch >= 0x20 && ch < 0x7f)), "byte " << int(ch));
}

BOOST_AUTO_TEST_CASE(receiver_reaccepts_and_counts_frames_of_the_next_connection) {
  temp_dir dir;
  peer_receiver recv(dir, "recv", {"--expect", "10", "--duration", "60", "--json"});
  {
    // A first gateway delivers 4 frames and goes away; the second delivers the other 6.
    gateway_fixture gw(consumer_toml("sink", recv.endpoint()) + route_toml("a", {"sink"}));
    BOOST_TEST_REQUIRE(gw.consumers_connected({"sink"}));
    const auto s =
        run_command(peer, {"send", "--to", "127.0.0.1:" + std::to_string(gw.supplier_port),
                           "--address", "a", "--count", "4"});
    BOOST_TEST_REQUIRE(s.exit_code == 0, s.err);
    // The 4 frames read by the gateway before it is told to stop.
    BOOST_TEST_REQUIRE(eventually(
        [&] {
          return scrape_metric(gw.metrics_port, "gatewayd_supplier_messages_received_total") == 4;
        },
        10s));
    gw.daemon->signal(SIGTERM);
    BOOST_TEST(gw.daemon->wait_exit(20s).has_value());
  }
  gateway_fixture gw(consumer_toml("sink", recv.endpoint()) + route_toml("a", {"sink"}));
  BOOST_TEST_REQUIRE(gw.consumers_connected({"sink"}));
  const auto s = run_command(peer, {"send", "--to", "127.0.0.1:" + std::to_string(gw.supplier_port),
                                    "--address", "a", "--count", "6"});
  BOOST_TEST_REQUIRE(s.exit_code == 0, s.err);
  const auto code = recv.process->wait_exit(60s);
  BOOST_TEST_REQUIRE(code.has_value());
  BOOST_TEST(*code == 0, recv.process->log());
  BOOST_TEST(json_field(recv.process->log(), "frames") == 10);
  BOOST_TEST(json_field(recv.process->log(), "connections_accepted") == 2);
  BOOST_TEST(json_field(recv.process->log(), "corrupt") == 0);
}

// --to A,B: a gateway that stops (lame duck) asks the sender to leave; it closes its side, so
// the gateway reads everything, and goes on at B. Nothing is lost, nothing re-sent, and the
// report says where each connection went and why it ended.
BOOST_AUTO_TEST_CASE(send_moves_to_the_next_gateway_when_one_asks_it_to_leave) {
  temp_dir dir;
  peer_receiver recv(dir, "recv", {"--duration", "60", "--json"});
  const std::string routes = consumer_toml("sink", recv.endpoint(), "queue_capacity = 100000") +
                             route_toml("o.>", {"sink"});
  gateway_fixture a(routes, "lame_duck_ms = 300"), b(routes, "lame_duck_ms = 300");
  BOOST_TEST_REQUIRE(a.consumers_connected({"sink"}));
  BOOST_TEST_REQUIRE(b.consumers_connected({"sink"}));
  const std::string to = "127.0.0.1:" + std::to_string(a.supplier_port) +
                         ",127.0.0.1:" + std::to_string(b.supplier_port);
  daemon_process sender(
      peer,
      {"send", "--to", to, "--address", "o.x,o.y", "--rate", "4000", "--duration", "3", "--json"},
      dir.path() / "send.log");
  // The sender streams through a (its first address) before a is asked to stop.
  BOOST_TEST_REQUIRE(eventually(
      [&] {
        return scrape_metric(a.metrics_port, "gatewayd_supplier_messages_received_total") >= 400;
      },
      10s));
  a.daemon->signal(SIGTERM);
  BOOST_TEST_REQUIRE(a.daemon->wait_exit(10s).value_or(-1) == 0, a.daemon->log());
  BOOST_TEST_REQUIRE(sender.wait_exit(20s).value_or(-1) == 0, sender.log());
  const auto report = nlohmann::json::parse(sender.log());
  BOOST_TEST(report["asked_to_leave"] == 1);
  BOOST_TEST(report["lost"] == 0);
  BOOST_TEST(report["resent"] == 0);
  BOOST_REQUIRE(report["links"].size() == 2u);
  BOOST_TEST(report["links"][0]["to"] == "127.0.0.1:" + std::to_string(a.supplier_port));
  BOOST_TEST(report["links"][0]["ended"] == "asked to leave");
  BOOST_TEST(report["links"][1]["to"] == "127.0.0.1:" + std::to_string(b.supplier_port));
  BOOST_TEST(report["links"][0]["sender"] != report["links"][1]["sender"]);
  const long long sent = report["frames"];
  BOOST_TEST(sent > 4000);
  BOOST_TEST(report["links"][0]["frames"].get<long long>() > 1000);
  // Everything A read before it closed was delivered: the receiver has every frame, and each
  // connection's frames in order.
  BOOST_TEST(eventually(
      [&] {
        return scrape_metric(b.metrics_port,
                             "gatewayd_consumer_messages_sent_total{consumer=\"sink\"}") +
                   report["links"][0]["frames"].get<double>() ==
               static_cast<double>(sent);
      },
      5s));
  recv.process->signal(SIGTERM);
  BOOST_TEST_REQUIRE(recv.process->wait_exit(10s).has_value());
  const auto log = recv.process->log();
  BOOST_TEST(json_field(log, "frames") == sent, log);
  BOOST_TEST(json_field(log, "lost") == 0);
  BOOST_TEST(json_field(log, "reordered") == 0);
  BOOST_TEST(json_field(log, "duplicated") == 0);
  BOOST_TEST(json_field(log, "streams") == 4);  // 2 connections x 2 addresses
}

// A gateway that dies without a word: the write that fails is written again on the next
// connection and reported as re-sent (its frames may have arrived twice). It hangs first and is
// then killed (as a watchdog does), with bytes unread, so its kernel resets the connection.
// Killed with nothing unread it would send an end-of-file, which TCP cannot tell from a stop
// unless something was written after it (supplier_link_test covers that case).
BOOST_AUTO_TEST_CASE(a_lost_connection_moves_on_and_reports_what_it_resent) {
  temp_dir dir;
  test_consumer sink;
  const std::string routes = consumer_toml("sink", sink.endpoint()) + route_toml("o.>", {"sink"});
  gateway_fixture a(routes), b(routes);
  BOOST_TEST_REQUIRE(sink.wait_for_connections(2, 5s));
  const std::string to = "127.0.0.1:" + std::to_string(a.supplier_port) +
                         ",127.0.0.1:" + std::to_string(b.supplier_port);
  daemon_process sender(
      peer, {"send", "--to", to, "--address", "o.x", "--rate", "20000", "--duration", "2"},
      dir.path() / "send.log");
  // The sender streams through a (its first address) before a freezes.
  BOOST_TEST_REQUIRE(eventually(
      [&] {
        return scrape_metric(a.metrics_port, "gatewayd_supplier_messages_received_total") >= 2000;
      },
      10s));
  a.daemon->signal(SIGSTOP);
  BOOST_TEST_REQUIRE(eventually([&] { return unread_bytes_at(a.supplier_port) > 0; }, 5s));
  a.daemon->signal(SIGKILL);
  BOOST_TEST_REQUIRE(sender.wait_exit(20s).value_or(-1) == 0, sender.log());
  const auto out = sender.log();
  const std::regex line(R"(1 connection\(s\) ended early: 0 asked to leave by a stopping )"
                        R"(gateway, 1 lost; reconnected 1 time\(s\); re-sent ([0-9]+) frames)");
  std::smatch m;
  BOOST_TEST_REQUIRE(std::regex_search(out, m, line), out);
  BOOST_TEST(std::stoul(m[1]) > 0u);
  BOOST_TEST(out.find("-> 127.0.0.1:" + std::to_string(a.supplier_port)) != std::string::npos);
  BOOST_TEST(out.find(", lost: ") != std::string::npos, out);
}

BOOST_AUTO_TEST_CASE(bad_arguments_exit_2_with_a_message_naming_the_problem) {
  struct bad {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<bad> cases = {
      {{}, "usage: gateway-peer send"},
      {{"shout"}, "unknown command 'shout'"},
      {{"send", "--address", "a"}, "--to HOST:PORT is required"},
      {{"send", "--to", "127.0.0.1:7400"}, "--address A is required"},
      {{"send", "--to", "localhost:7400", "--address", "a"}, "is not IPv4:PORT"},
      {{"send", "--to", "127.0.0.1:7400,", "--address", "a"}, "--to: '' is not IPv4:PORT"},
      {{"send", "--to", "127.0.0.1:7400,127.0.0.1:0", "--address", "a"}, "port 0 cannot"},
      {{"send", "--to", "127.0.0.1:7400", "--address", "a..b"}, "is not a GWP/1 address"},
      {{"send", "--to", "127.0.0.1:7400", "--address", "a,,b"}, "'' is not a GWP/1 address"},
      {{"send", "--to", "127.0.0.1:7400", "--address", "a", "--size", "8"}, "--size: '8'"},
      {{"send", "--to", "127.0.0.1:7400", "--address", "a", "--rate", "fast"}, "--rate: 'fast'"},
      {{"send", "--to", "127.0.0.1:7400", "--address", "a", "--count", "1", "--duration", "1"},
       "not both"},
      {{"send", "--to", "127.0.0.1:7400", "--address", "a", "--colour"},
       "unknown option '--colour'"},
      {{"recv"}, "--listen HOST:PORT is required"},
      {{"recv", "--listen", "127.0.0.1:0", "--stall-after"}, "--stall-after needs a value"},
      {{"recv", "--listen", "127.0.0.1:0", "--duration", "-1"}, "--duration: '-1'"},
  };
  for (const auto& c : cases) {
    const auto r = run_command(peer, c.args);
    BOOST_TEST(r.exit_code == 2, c.message);
    BOOST_TEST(r.err.find(c.message) != std::string::npos, r.err);
  }
  for (const std::string sub : {"send", "recv"}) {
    const auto r = run_command(peer, {sub, "--help"});
    BOOST_TEST(r.exit_code == 0);
    BOOST_TEST(r.out.find("usage: gateway-peer " + sub) != std::string::npos, r.out);
    BOOST_TEST(r.out.find("exit codes") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(unreachable_endpoints_exit_1_with_a_clear_error) {
  const auto port = std::to_string(free_port());
  const auto r =
      run_command(peer, {"send", "--to", "127.0.0.1:" + port, "--address", "a", "--count", "1"});
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(r.err.find("cannot connect to 127.0.0.1:" + port + ": Connection refused") !=
                 std::string::npos,
             r.err);

  asio::io_context ioc;
  asio::ip::tcp::acceptor taken(ioc, {asio::ip::make_address("127.0.0.1"), 0});
  const auto busy = std::to_string(taken.local_endpoint().port());
  const auto l = run_command(peer, {"recv", "--listen", "127.0.0.1:" + busy, "--duration", "1"});
  BOOST_TEST(l.exit_code == 1);
  BOOST_TEST(l.err.find("cannot listen on 127.0.0.1:" + busy) != std::string::npos, l.err);
}
