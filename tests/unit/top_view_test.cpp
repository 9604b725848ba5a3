// gateway-peer top's screen from its inputs alone: the exposition reader, /connz and /routez
// into rows (supplier states), rates between two readings, the sort keys, and a screen that
// always fits the terminal with the key line last.
#include <boost/test/unit_test.hpp>

#include "tools/gateway_peer/top_view.hpp"

using namespace gatewayd::tools;
using namespace std::chrono_literals;

namespace {

const char* metrics_text = R"(# HELP gatewayd_build_info Always 1.
# TYPE gatewayd_build_info gauge
gatewayd_build_info{version="1.2.3"} 1
gatewayd_supplier_rejected_frames_total{reason="dropped"} 4
gatewayd_supplier_rejected_frames_total{reason="unroutable"} 1
gatewayd_supplier_connections_closed_total{reason="reclaimed"} 7
gatewayd_supplier_connections_closed_total{reason="not_allowed"} 2
gatewayd_config_info{sha256="a b}c"} 1
gatewayd_supplier_unconfirmed_frames 12
gatewayd_supplier_messages_received_total 1000
)";

std::string connz(std::uint64_t fast_sent, std::uint64_t supplier_frames) {
  return R"({"now": "2026-11-27T10:00:10.000Z",
    "suppliers": {"total": 3, "listed": 3, "connections": [
      {"peer": "127.0.0.1:1001", "since": "2026-11-27T10:00:00.000Z", "frames": )" +
         std::to_string(supplier_frames) + R"(, "bytes": 1, "paused": false,
       "paused_since": null, "tls_records": null, "confirmed": 0, "pending": 0},
      {"peer": "127.0.0.1:1002", "since": "2026-11-27T09:58:00.000Z", "frames": 5, "bytes": 1,
       "paused": true, "paused_since": null, "tls_records": "openssl", "confirmed": 3,
       "pending": 2},
      {"peer": "127.0.0.1:1003", "since": "2026-11-27T10:00:05.000Z", "frames": 5, "bytes": 1,
       "paused": false, "paused_since": null, "tls_records": null, "confirmed": 3,
       "pending": 2}]},
    "consumers": [
      {"name": "fast", "state": "connected", "congested": false, "overflow": "drop-oldest",
       "queue": {"depth": 1, "bytes": 10, "capacity": 100}, "sent": {"frames": )" +
         std::to_string(fast_sent) + R"(, "bytes": 2048},
       "dropped": {"queue_full": 0}, "ack": false,
       "unacked": {"frames": 0, "bytes": 0, "redelivered": 0}, "reconnects": 0},
      {"name": "slow", "state": "connected", "congested": true, "overflow": "backpressure",
       "queue": {"depth": 90, "bytes": 10, "capacity": 100}, "sent": {"frames": 5, "bytes": 5},
       "dropped": {"queue_full": 3, "shutdown": 2}, "ack": true,
       "unacked": {"frames": 6, "bytes": 3000, "redelivered": 1}, "reconnects": 2},
      {"name": "away", "state": "disconnected", "congested": true, "overflow": "drop-newest",
       "queue": {"depth": 50, "bytes": 10, "capacity": 100}, "sent": {"frames": 0, "bytes": 0},
       "dropped": {"queue_full": 9}, "ack": false,
       "unacked": {"frames": 0, "bytes": 0, "redelivered": 0}, "reconnects": 4}]})";
}

const char* routez = R"({"version": 3, "sha256": "0123456789abcdef0123", "routes": [{}, {}]})";

gateway_reading reading(std::chrono::steady_clock::time_point at, std::uint64_t fast_sent,
                        std::uint64_t supplier_frames) {
  gateway_reading r;
  r.at = at;
  read_bodies(r, metrics_text, connz(fast_sent, supplier_frames), routez);
  return r;
}

std::vector<std::string> order(const std::vector<std::string>& screen) {
  std::vector<std::string> names;
  bool in_table = false;
  for (const auto& l : screen) {
    if (l.rfind("CONSUMER", 0) == 0) {
      in_table = true;
    } else if (in_table && l.empty()) {
      break;
    } else if (in_table) {
      names.push_back(l.substr(0, l.find(' ')));
    }
  }
  return names;
}

bool has_line(const std::vector<std::string>& screen, const std::string& text) {
  for (const auto& l : screen)
    if (l.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_exposition_reader_sums_by_label_and_reads_label_values) {
  const auto e = exposition::parse(metrics_text);
  BOOST_TEST(e.sum("gatewayd_supplier_rejected_frames_total") == 5);
  BOOST_TEST(e.sum("gatewayd_supplier_connections_closed_total", {"reason=\"reclaimed\""}) == 7);
  BOOST_TEST(e.sum("gatewayd_nothing") == 0);
  BOOST_TEST(e.label("gatewayd_build_info", "version") == "1.2.3");
  BOOST_TEST(e.label("gatewayd_config_info", "sha256") == "a b}c");  // quotes hold } and spaces
  BOOST_TEST(e.label_values("gatewayd_supplier_rejected_frames_total", "reason") ==
                 (std::vector<std::string>{"dropped", "unroutable"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(connz_and_routez_become_rows_with_states) {
  const auto r = reading({}, 100, 10);
  BOOST_TEST_REQUIRE(r.consumers.size() == 3u);
  BOOST_TEST(r.consumers[0].state == "connected");
  BOOST_TEST(r.consumers[1].state == "congested");
  BOOST_TEST(r.consumers[2].state == "disconnected");
  BOOST_TEST(r.consumers[1].dropped == 5u);  // every reason
  BOOST_TEST(r.consumers[1].unacked_bytes == 3000u);
  BOOST_TEST_REQUIRE(r.suppliers.size() == 3u);
  BOOST_TEST(r.suppliers[0].state == "reading");
  BOOST_TEST(r.suppliers[1].state == "paused");  // paused wins over frames owed
  BOOST_TEST(r.suppliers[2].state == "confirming");
  BOOST_TEST(r.suppliers[1].age_seconds == 130);
  BOOST_TEST(r.suppliers[1].tls == "openssl");
  BOOST_TEST(r.table_version == 3u);
  BOOST_TEST(r.routes == 2u);
  gateway_reading bad;
  BOOST_CHECK_THROW(read_bodies(bad, metrics_text, "{\"suppliers\": 1", routez), std::exception);
}

BOOST_AUTO_TEST_CASE(rates_are_the_growth_between_two_readings) {
  top_view v;
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  v.update(reading(t0, 100, 10));
  auto screen = v.render(200, 40, "127.0.0.1:9464");
  BOOST_TEST(has_line(screen,
                      "gatewayd 1.2.3 at 127.0.0.1:9464  table v3, 2 routes, sha256 "
                      "0123456789ab"));
  BOOST_TEST(has_line(screen, "suppliers 3: reading 1  paused 1  confirming 1  reclaimed 7"));
  BOOST_TEST(has_line(screen, "unconfirmed 12  rejected dropped 4 unroutable 1"));
  v.update(reading(t0 + 2s, 300, 50));
  screen = v.render(200, 40, "127.0.0.1:9464");
  bool fast_rate = false, supplier_rate = false;
  for (const auto& l : screen) {
    if (l.rfind("fast ", 0) == 0) fast_rate = l.find(" 300      100 ") != std::string::npos;
    if (l.rfind("127.0.0.1:1001", 0) == 0) supplier_rate = l.find(" 20 ") != std::string::npos;
  }
  BOOST_TEST(fast_rate, screen[0]);
  BOOST_TEST(supplier_rate);
  // A failed look keeps the figures and says why.
  gateway_reading failed;
  failed.error = "/metrics: Connection refused";
  v.update(failed);
  screen = v.render(200, 40, "127.0.0.1:9464");
  BOOST_TEST(has_line(screen, "! cannot read the gateway: /metrics: Connection refused"));
  BOOST_TEST(has_line(screen, "fast "));
}

BOOST_AUTO_TEST_CASE(keys_sort_reverse_and_quit) {
  top_view v;
  v.update(reading({}, 100, 10));
  const auto names = [&] { return order(v.render(200, 40, "x")); };
  BOOST_TEST(names() == (std::vector<std::string>{"away", "fast", "slow"}),
             boost::test_tools::per_element());
  BOOST_TEST(v.handle_key('f'));
  BOOST_TEST(names() == (std::vector<std::string>{"slow", "away", "fast"}),
             boost::test_tools::per_element());
  BOOST_TEST(v.handle_key('d'));
  BOOST_TEST(names() == (std::vector<std::string>{"away", "slow", "fast"}),
             boost::test_tools::per_element());
  BOOST_TEST(v.handle_key('r'));
  BOOST_TEST(names() == (std::vector<std::string>{"fast", "slow", "away"}),
             boost::test_tools::per_element());
  BOOST_TEST(v.handle_key('u'));
  BOOST_TEST(v.handle_key('r'));
  BOOST_TEST(names() == (std::vector<std::string>{"slow", "away", "fast"}),
             boost::test_tools::per_element());
  BOOST_TEST(v.handle_key('s'));  // unacked -> name: the columns go round
  BOOST_TEST((v.sorted_by() == sort_key::name));
  BOOST_TEST(!v.handle_key('x'));
  BOOST_TEST(!v.quit());
  BOOST_TEST(v.handle_key('q'));
  BOOST_TEST(v.quit());
}

BOOST_AUTO_TEST_CASE(the_screen_fits_the_terminal_with_the_keys_last) {
  top_view v;
  v.update(reading({}, 100, 10));
  for (std::size_t height : {1u, 3u, 12u, 15u, 60u}) {
    const auto screen = v.render(40, height, "127.0.0.1:9464");
    BOOST_TEST(screen.size() == height);
    for (const auto& l : screen)
      BOOST_TEST(l.size() <= 40u);
    BOOST_TEST(screen.back().rfind("q quit", 0) == 0u);
  }
  // Too short for every supplier: the rest are counted, not cut off silently.
  BOOST_TEST(has_line(v.render(200, 14, "x"), "... 2 more"));
  // Before any reading, and with no screen to fit (--once).
  top_view empty;
  BOOST_TEST(has_line(empty.render(80, 10, "x"), "reading the gateway"));
  BOOST_TEST(!has_line(v.render(200, 0, "x"), "q quit"));
}
