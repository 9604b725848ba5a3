// `gateway-peer top` in a real terminal: tmux runs it against the real daemon and the test reads
// the screen (capture-pane). The figures on screen are those /metrics serves, the rates follow
// the traffic, the sort keys reorder the consumers, and q or Ctrl-C end it with the terminal
// as it was (normal screen, canonical mode, echo).
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "protocol/frame_codec.hpp"
#include "tests/support/exposition.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/http_get.hpp"
#include "tests/support/peer_tool.hpp"
#include "tests/support/test_peers.hpp"
#include "tests/support/wait_until.hpp"

using namespace gatewayd::test;
using namespace std::chrono_literals;

namespace {

// A tmux server of the test's own (its socket in the test's directory, no user config), one
// session whose pane runs /bin/sh on a script: `top ARGS`, then what it exited with and whether
// the terminal is back in canonical mode with echo, then a sleep that keeps the pane open. The
// script traps SIGINT as an interactive shell would, so Ctrl-C ends top, not the script. The
// destructor ends that tmux server.
class tmux_session {
 public:
  tmux_session(const temp_dir& dir, const std::string& top_args, int width, int height)
      : socket_((dir.path() / "tmux.sock").string()) {
    const auto script = dir.write(
        "top.sh", "trap : INT\n" + peer_binary() + " top " + top_args +
                      "\necho \"top exited $?\"\n"
                      "echo \"tty: $(stty -a | tr ' ;' '\\n\\n' | grep -x -e icanon -e echo | "
                      "tr '\\n' ' ')\"\nexec sleep 60\n");
    // Several arguments: tmux runs them as they are, with no shell of its own around them.
    const auto r =
        tmux({"-f", "/dev/null", "new-session", "-d", "-s", "top", "-x", std::to_string(width),
              "-y", std::to_string(height), "/bin/sh", script.string()});
    BOOST_TEST_REQUIRE(r.exit_code == 0, "tmux new-session: " << r.err);
  }
  ~tmux_session() { tmux({"kill-server"}); }
  tmux_session(const tmux_session&) = delete;
  tmux_session& operator=(const tmux_session&) = delete;

  std::string screen() const { return tmux({"capture-pane", "-p", "-t", "top"}).out; }
  void keys(const std::string& k) const { tmux({"send-keys", "-t", "top", k}); }
  // A pane variable: #{alternate_on} is 1 while the program is on the alternate screen.
  std::string pane(const std::string& format) const {
    auto out = tmux({"display-message", "-p", "-t", "top", format}).out;
    while (!out.empty() && (out.back() == '\n' || out.back() == ' '))
      out.pop_back();
    return out;
  }

 private:
  command_result tmux(std::vector<std::string> args) const {
    args.insert(args.begin(), {"-S", socket_});
    return run_command(TMUX_BINARY, args, 10s);
  }
  std::string socket_;
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    out.push_back(l);
  return out;
}

std::vector<std::string> fields_of(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string f; in >> f;)
    out.push_back(f);
  return out;
}

// The consumer table's row of `name` on the screen, split into its columns: name, state,
// overflow, depth/capacity, fill, sent, sent/s, B/s, drops, drop/s, unacked, unacked bytes,
// redelivered, reconnects. Empty when it is not there.
std::vector<std::string> consumer_row(const std::string& screen, const std::string& name) {
  for (const auto& l : lines_of(screen)) {
    auto f = fields_of(l);
    if (f.size() == 14 && f[0] == name) return f;
  }
  return {};
}

// The consumer names in the order the screen lists them.
std::vector<std::string> consumer_order(const std::string& screen) {
  std::vector<std::string> names;
  bool in_table = false;
  for (const auto& l : lines_of(screen)) {
    const auto f = fields_of(l);
    if (!f.empty() && f[0] == "CONSUMER") {
      in_table = true;
    } else if (in_table && f.size() == 14) {
      names.push_back(f[0]);
    } else if (in_table) {
      break;
    }
  }
  return names;
}

std::string number(double v) {
  return std::to_string(static_cast<long long>(v));
}

}  // namespace

BOOST_AUTO_TEST_CASE(top_shows_what_metrics_shows_sorts_and_quits_cleanly) {
  // fast reads everything; down refuses (nobody listens): 10 queued, the rest dropped; acked
  // (ack = true) takes frames and never acknowledges: all held, their CONFIRM frames owed.
  test_consumer fast, acked;
  const auto down = "127.0.0.1:" + std::to_string(free_port());
  gateway_fixture gw(consumer_toml("fast", fast.endpoint()) +
                     consumer_toml("down", down, "queue_capacity = 10\n") +
                     consumer_toml("acked", acked.endpoint(), "ack = true\n") +
                     route_toml("a.>", {"fast", "down"}) + route_toml("k.>", {"acked"}));
  BOOST_TEST_REQUIRE(gw.consumers_connected({"fast", "acked"}));

  tmux_session tmux(gw.dir,
                    "--metrics 127.0.0.1:" + std::to_string(gw.metrics_port) + " --interval 0.5",
                    200, 40);

  // While a supplier sends about 100 frames a second, top's rate for fast follows it.
  test_supplier plain(gw.supplier_port);
  std::atomic<bool> sending{true};
  std::thread pacer([&] {
    for (int i = 0; sending.load() && i < 1000; ++i) {  // stopped once a rate shows
      plain.send_frame("a.b", "payload");
      std::this_thread::sleep_for(10ms);
    }
  });
  double seen_rate = -1;
  const bool rate_shown = wait_until(
      [&] {
        const auto row = consumer_row(tmux.screen(), "fast");
        if (row.empty() || row[6] == "-") return false;
        seen_rate = std::stod(row[6]);
        return seen_rate > 0;
      },
      10s, 50ms);
  sending = false;
  pacer.join();
  BOOST_TEST(rate_shown, "no send rate for fast on:\n" << tmux.screen());
  BOOST_TEST(seen_rate < 1000, seen_rate);  // about 100/s; never the total

  // Then the traffic stops: CONFIRM frames to the consumer that never acknowledges.
  test_supplier confirming(gw.supplier_port);
  for (int i = 0; i < 25; ++i)
    confirming.send(
        gatewayd::protocol::encode_frame("k.x", "owed", gatewayd::protocol::frame_flags::confirm));
  BOOST_TEST_REQUIRE(acked.wait_for_count(25, 10s));
  std::string metrics;
  const auto scrape = [&] {
    metrics = http_get(gw.metrics_port, "/metrics").body;
    return metrics;
  };
  const auto value = [&](const std::string& series) {
    return sample_value(metrics, series).value_or(-1);
  };
  BOOST_TEST_REQUIRE(wait_until(
      [&] {
        scrape();
        return value("gatewayd_consumer_queue_depth{consumer=\"down\"}") == 10 &&
               value("gatewayd_consumer_unacked_frames{consumer=\"acked\"}") == 25 &&
               value("gatewayd_supplier_unconfirmed_frames") == 25;
      },
      10s, 10ms));

  // The screen settles on what /metrics says, figure for figure.
  std::string screen;
  const auto row_matches = [&](const std::string& name) {
    const auto row = consumer_row(screen, name);
    const std::string c = "{consumer=\"" + name + "\"}";
    return !row.empty() &&
           row[3] == number(value("gatewayd_consumer_queue_depth" + c)) + "/" +
                         number(value("gatewayd_consumer_queue_capacity" + c)) &&
           row[5] == number(value("gatewayd_consumer_messages_sent_total" + c)) &&
           row[6] == "0.0" &&
           row[8] == number(sum_samples(metrics, "gatewayd_consumer_dropped_messages_total",
                                        "consumer=\"" + name + "\"")) &&
           row[13] == number(value("gatewayd_consumer_reconnects_total" + c));
  };
  const bool settled = wait_until(
      [&] {
        screen = tmux.screen();
        scrape();
        return row_matches("fast") && row_matches("down") && row_matches("acked");
      },
      10s, 100ms);
  BOOST_TEST_REQUIRE(settled, "screen:\n" << screen << "\n/metrics:\n" << metrics);
  BOOST_TEST_MESSAGE("the screen settled:\n" << screen);
  BOOST_TEST(consumer_row(screen, "fast")[1] == "connected");
  BOOST_TEST(consumer_row(screen, "down")[1] == "disconnected");
  BOOST_TEST(consumer_row(screen, "down")[4] == "100%");
  BOOST_TEST(
      value("gatewayd_consumer_dropped_messages_total{consumer=\"down\",reason=\"queue_full\"}") >
      0);
  const auto acked_row = consumer_row(screen, "acked");
  BOOST_TEST(acked_row[10] ==
             number(value("gatewayd_consumer_unacked_frames{consumer=\"acked\"}")));
  BOOST_TEST(acked_row[12] ==
             number(value("gatewayd_consumer_redelivered_frames_total{consumer=\"acked\"}")));
  BOOST_TEST(consumer_row(screen, "fast")[10] == "-");  // not an ack consumer
  // The header: the build, the table's version, confirms owed, suppliers by state.
  const auto routez = nlohmann::json::parse(http_get(gw.metrics_port, "/routez").body);
  const std::regex build(R"re(gatewayd_build_info\{version="([^"]+)"\})re");
  std::smatch version;
  BOOST_TEST_REQUIRE(std::regex_search(metrics, version, build));
  BOOST_TEST(screen.find("gatewayd " + version[1].str() + " at 127.0.0.1:") != std::string::npos,
             screen);
  BOOST_TEST(screen.find("table v" + std::to_string(routez["version"].get<long long>()) +
                         ", 2 routes") != std::string::npos,
             screen);
  BOOST_TEST(screen.find("unconfirmed " + number(value("gatewayd_supplier_unconfirmed_frames"))) !=
                 std::string::npos,
             screen);
  BOOST_TEST(screen.find("suppliers 2: reading 1  paused 0  confirming 1") != std::string::npos,
             screen);

  // Sort keys: d puts the consumer with the most drops first, u the one holding most unacked,
  // n goes back to names.
  const auto order_after = [&](const std::string& key, const std::vector<std::string>& want) {
    tmux.keys(key);
    return wait_until([&] { return consumer_order(tmux.screen()) == want; }, 5s, 20ms);
  };
  BOOST_TEST(order_after("d", {"down", "acked", "fast"}), tmux.screen());
  BOOST_TEST(tmux.screen().find("sorted by drops") != std::string::npos);
  BOOST_TEST(order_after("u", {"acked", "down", "fast"}), tmux.screen());
  BOOST_TEST(order_after("n", {"acked", "down", "fast"}), tmux.screen());
  BOOST_TEST(order_after("r", {"fast", "down", "acked"}), tmux.screen());

  // q: top exits 0, and the shell after it finds its terminal as it was.
  BOOST_TEST(tmux.pane("#{alternate_on}") == "1");
  tmux.keys("q");
  BOOST_TEST(
      wait_until([&] { return tmux.screen().find("top exited") != std::string::npos; }, 5s, 20ms),
      tmux.screen());
  BOOST_TEST_REQUIRE(
      wait_until([&] { return tmux.screen().find("tty:") != std::string::npos; }, 5s, 20ms));
  const auto after = tmux.screen();
  BOOST_TEST(after.find("top exited 0") != std::string::npos, after);
  BOOST_TEST(after.find("tty: icanon echo") != std::string::npos, after);
  BOOST_TEST(tmux.pane("#{alternate_on}") == "0");
  BOOST_TEST(tmux.pane("#{cursor_flag}") == "1");
}

// Ctrl-C (SIGINT from the terminal) ends top as q does: exit 0, the terminal restored.
BOOST_AUTO_TEST_CASE(ctrl_c_restores_the_terminal) {
  test_consumer c;
  gateway_fixture gw(consumer_toml("c", c.endpoint()) + route_toml("a.>", {"c"}));
  tmux_session tmux(gw.dir, "--metrics 127.0.0.1:" + std::to_string(gw.metrics_port), 160, 30);
  BOOST_TEST_REQUIRE(
      wait_until([&] { return !consumer_row(tmux.screen(), "c").empty(); }, 10s, 20ms),
      tmux.screen());
  BOOST_TEST(tmux.pane("#{alternate_on}") == "1");
  BOOST_TEST(tmux.pane("#{cursor_flag}") == "0");
  tmux.keys("C-c");
  BOOST_TEST_REQUIRE(
      wait_until([&] { return tmux.screen().find("tty:") != std::string::npos; }, 5s, 20ms),
      tmux.screen());
  const auto after = tmux.screen();
  BOOST_TEST(after.find("top exited 0") != std::string::npos, after);
  BOOST_TEST(after.find("tty: icanon echo") != std::string::npos, after);
  BOOST_TEST(tmux.pane("#{alternate_on}") == "0");
  BOOST_TEST(tmux.pane("#{cursor_flag}") == "1");
}
