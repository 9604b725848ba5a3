#include <boost/test/unit_test.hpp>

#include <asio.hpp>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <thread>

#include "protocol/frame_codec.hpp"
#include "tests/support/binaries.hpp"
#include "tests/support/exposition.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/http_get.hpp"
#include "tests/support/test_peers.hpp"

using namespace gatewayd::test;
using namespace std::chrono_literals;

namespace {

std::string scrape(const gateway_fixture& gw) {
  const auto r = http_get(gw.metrics_port, "/metrics");
  BOOST_TEST_REQUIRE(r.status == 200);
  return r.body;
}

double value_of(const gateway_fixture& gw, const std::string& series) {
  return sample_value(scrape(gw), series).value_or(-1);
}

// Polls the scrape until `series` has `expected`; reports the last value on failure.
void expect_eventually(const gateway_fixture& gw, const std::string& series, double expected) {
  double last = -1;
  const bool ok = eventually(
      [&] {
        last = value_of(gw, series);
        return last == expected;
      },
      15s);
  BOOST_TEST(ok, series << " = " << last << ", expected " << expected);
}

std::string version_of_binary() {
  const auto r = run_command(gatewayd_binary(), {"--version"});
  std::string v = r.out.empty() ? r.err : r.out;
  v = v.substr(v.rfind(' ') + 1);
  while (!v.empty() && (v.back() == '\n' || v.back() == '\r'))
    v.pop_back();
  return v;
}

}  // namespace

BOOST_AUTO_TEST_CASE(values_move_with_traffic) {
  test_consumer fast, slow;
  slow.stall(true);
  constexpr int slow_capacity = 10;
  gateway_fixture gw(consumer_toml("fast", fast.endpoint()) +
                     consumer_toml("slow", slow.endpoint(),
                                   "queue_capacity = " + std::to_string(slow_capacity) +
                                       "\noverflow = \"drop-oldest\"") +
                     route_toml("fast.>", {"fast"}) + route_toml("slow.>", {"slow"}));
  BOOST_TEST_REQUIRE(gw.metrics_port != 0);
  BOOST_TEST_REQUIRE(fast.wait_for_connections(1, 10s));
  BOOST_TEST_REQUIRE(slow.wait_for_connections(1, 10s));
  expect_eventually(gw, R"(gatewayd_consumer_connected{consumer="fast"})", 1);
  expect_eventually(gw, R"(gatewayd_consumer_connected{consumer="slow"})", 1);

  test_supplier supplier(gw.supplier_port);
  constexpr int fast_frames = 500, unroutable = 20;
  double bytes = 0;
  const std::string small(128, 'p'), large(60000, 'L');
  // Scrapes while frames flow: each succeeds and the counters never go backwards.
  std::atomic<bool> sending{true};
  std::vector<double> seen;
  int failed_scrapes = 0;
  std::thread scraper([&] {
    do {  // at least once, however fast the sending is
      const auto r = http_get(gw.metrics_port, "/metrics");
      if (r.status != 200) {
        ++failed_scrapes;
        continue;
      }
      seen.push_back(
          sample_value(r.body, "gatewayd_supplier_messages_received_total").value_or(-1));
    } while (sending);
  });
  for (int i = 0; i < fast_frames; ++i) {
    supplier.send_frame("fast.x", small);
    bytes += 10 + 6 + small.size();
  }
  BOOST_TEST(fast.wait_for_count(fast_frames, 15s));  // not REQUIRE: the scraper must be joined
  sending = false;
  scraper.join();
  BOOST_TEST(failed_scrapes == 0);
  BOOST_TEST(!seen.empty());
  BOOST_TEST(std::is_sorted(seen.begin(), seen.end()));
  BOOST_TEST(seen.front() >= 0);
  for (int i = 0; i < unroutable; ++i) {
    supplier.send_frame("nobody.home", small);
    bytes += 10 + 6 + 5 + small.size();
  }
  // Fill the stalled consumer a few frames at a time, slower than the gateway drains into the
  // kernel, until the socket buffers are full and the queue holds its capacity; then
  // overflow it. (Sending all at once would overflow the queue while the kernel still has
  // room, and the queue could drain to 0 afterwards.)
  const std::string slow_depth = R"(gatewayd_consumer_queue_depth{consumer="slow"})";
  int slow_frames = 0;
  auto send_slow = [&](int n) {
    for (int i = 0; i < n; ++i, ++slow_frames) {
      supplier.send_frame("slow.x", large);
      bytes += 10 + 6 + large.size();
    }
  };
  while (slow_frames < 2000 && value_of(gw, slow_depth) != slow_capacity)
    send_slow(3);
  BOOST_TEST_REQUIRE(value_of(gw, slow_depth) == slow_capacity,
                     "queue never filled after " << slow_frames << " frames");
  send_slow(50);
  const int total = fast_frames + unroutable + slow_frames;

  expect_eventually(gw, "gatewayd_supplier_messages_received_total", total);
  expect_eventually(gw, "gatewayd_supplier_bytes_received_total", bytes);
  expect_eventually(gw, "gatewayd_messages_unroutable_total", unroutable);
  expect_eventually(gw, "gatewayd_supplier_connections", 1);
  BOOST_TEST_REQUIRE(fast.wait_for_count(fast_frames, 15s));
  expect_eventually(gw, R"(gatewayd_consumer_messages_sent_total{consumer="fast"})", fast_frames);
  expect_eventually(gw, R"(gatewayd_consumer_bytes_sent_total{consumer="fast"})",
                    fast_frames * (10 + 6 + 128.0));
  // Once nothing moves any more (the write is blocked on full socket buffers), the stalled
  // consumer's queue holds exactly its capacity; the batch blocked in the write is not counted.
  const std::string slow_sent = R"(gatewayd_consumer_messages_sent_total{consumer="slow"})";
  double previous = -1;
  const bool blocked = eventually(
      [&] {
        const double now = value_of(gw, slow_sent);
        const bool still = now == previous;
        previous = now;
        std::this_thread::sleep_for(300ms);
        return still;
      },
      15s);
  BOOST_TEST(blocked);
  expect_eventually(gw, R"(gatewayd_consumer_queue_depth{consumer="slow"})", slow_capacity);
  expect_eventually(gw, R"(gatewayd_consumer_queue_bytes{consumer="slow"})",
                    slow_capacity * (10 + 6 + 60000.0));

  const std::string during = scrape(gw);
  BOOST_TEST_MESSAGE("exposition during traffic:\n" << during);
  const double dropped =
      sample_value(
          during,
          R"(gatewayd_consumer_dropped_messages_total{consumer="slow",reason="queue_full"})")
          .value_or(-1);
  BOOST_TEST(dropped > 0);
  BOOST_TEST(
      sum_samples(during, "gatewayd_consumer_dropped_messages_total", R"(consumer="fast")") == 0);
  BOOST_TEST(*sample_value(during, R"(gatewayd_consumer_queue_capacity{consumer="slow"})") ==
             slow_capacity);
  BOOST_TEST(sum_samples(during, "gatewayd_lf_threads") == 2);  // threads = 2 in the fixture
  BOOST_TEST(*sample_value(during, "gatewayd_lf_promotion_latency_seconds_count") > 0);
  BOOST_TEST(*sample_value(during, R"(gatewayd_lf_promotion_latency_seconds_bucket{le="+Inf"})") ==
             *sample_value(during, "gatewayd_lf_promotion_latency_seconds_count"));
  BOOST_TEST(*sample_value(during, "gatewayd_config_last_reload_successful") == 1);
  BOOST_TEST(*sample_value(during, "gatewayd_config_last_reload_success_timestamp_seconds") >
             1.6e9);
  BOOST_TEST(*sample_value(during, "gatewayd_routing_table_routes") == 2);
  const std::string build_info = "gatewayd_build_info{version=\"" + version_of_binary() + "\"}";
  BOOST_TEST(sample_value(during, build_info).value_or(0) == 1, build_info);
  BOOST_TEST(*sample_value(during, "process_open_fds") > 0);
  BOOST_TEST(*sample_value(during, "process_resident_memory_bytes") > 1e6);

  // Everything queued for the stalled consumer is either delivered or counted as dropped.
  slow.stall(false);
  double sent = 0, lost = 0;
  const bool settled = eventually(
      [&] {
        const auto text = scrape(gw);
        sent = sample_value(text, R"(gatewayd_consumer_messages_sent_total{consumer="slow"})")
                   .value_or(-1);
        lost = sum_samples(text, "gatewayd_consumer_dropped_messages_total", R"(consumer="slow")");
        return sent + lost == static_cast<double>(slow_frames) &&
               sample_value(text, R"(gatewayd_consumer_queue_depth{consumer="slow"})") == 0.0;
      },
      20s);
  BOOST_TEST(settled, "sent " << sent << " + dropped " << lost << " != " << slow_frames);
  BOOST_TEST(slow.wait_for_count(static_cast<std::size_t>(sent), 10s));
  BOOST_TEST(slow.count() == static_cast<std::size_t>(sent));
  BOOST_TEST(slow.corruptions() == 0u);
  expect_eventually(gw, "gatewayd_queued_bytes", 0);
}

BOOST_AUTO_TEST_CASE(protocol_errors_are_counted_by_reason) {
  test_consumer c;
  gateway_fixture gw(consumer_toml("c", c.endpoint()) + route_toml("a.>", {"c"}));
  {
    test_supplier garbage(gw.supplier_port);
    garbage.send("this is not GWP/1 at all");
    BOOST_TEST(garbage.closed_by_peer(5s));
  }
  {
    test_supplier bad_version(gw.supplier_port);
    auto frame = gatewayd::protocol::encode_frame("a.b", "x");
    bad_version.send(frame);  // one good frame first: it is still routed
    frame[2] = 0x07;
    bad_version.send(frame);
    BOOST_TEST(bad_version.closed_by_peer(5s));
  }
  expect_eventually(gw, R"(gatewayd_supplier_protocol_errors_total{reason="bad_magic"})", 1);
  expect_eventually(gw, R"(gatewayd_supplier_protocol_errors_total{reason="bad_version"})", 1);
  expect_eventually(gw, "gatewayd_supplier_messages_received_total", 1);
  expect_eventually(gw, "gatewayd_supplier_connections", 0);
  expect_eventually(gw, "gatewayd_supplier_connections_accepted_total", 2);
  const auto text = scrape(gw);
  BOOST_TEST(sum_samples(text, "gatewayd_supplier_protocol_errors_total") == 2);
  BOOST_TEST(c.wait_for_count(1, 10s));
}

BOOST_AUTO_TEST_CASE(exposition_passes_promtool_check_metrics) {
  test_consumer c;
  gateway_fixture gw(consumer_toml("c", c.endpoint()) + route_toml("a.>", {"c"}));
  BOOST_TEST_REQUIRE(c.wait_for_connections(1, 10s));
  test_supplier s(gw.supplier_port);
  for (int i = 0; i < 100; ++i)
    s.send_frame("a.b", "payload");
  BOOST_TEST_REQUIRE(c.wait_for_count(100, 10s));
  const auto file = gw.dir.write("exposition.txt", scrape(gw));
  const auto r = run_command("/bin/sh", {"-c", "promtool check metrics < '" + file.string() + "'"});
  BOOST_TEST(r.exit_code == 0, "promtool: " << r.out << r.err);
  // promtool prints lint findings (naming, units) even when it exits 0: there must be none
  // for gatewayd's own families.
  BOOST_TEST(r.out.find("gatewayd_") == std::string::npos, r.out);
  BOOST_TEST(r.err.find("gatewayd_") == std::string::npos, r.err);
}

BOOST_AUTO_TEST_CASE(metrics_disabled_serves_nothing) {
  test_consumer c;
  gateway_fixture gw(consumer_toml("c", c.endpoint()) + route_toml("a.>", {"c"}), "", {}, false);
  BOOST_TEST(gw.metrics_port == 0);
  BOOST_TEST(gw.daemon->count_in_log("serving metrics") == 0u);
}

// [metrics] allow is civetweb's access list: a client from elsewhere is accepted by the kernel
// and closed by civetweb at once, before a byte is read or written (no 403: the connection
// ends in order with nothing in it), and logged. Loopback answers every 127/8 address on Linux,
// so a client bound to 127.0.0.2 stands for another host. The default (127.0.0.0/8) serves it.
BOOST_AUTO_TEST_CASE(the_allow_list_refuses_other_clients_before_a_byte) {
  test_consumer c;
  const std::string routes = consumer_toml("c", c.endpoint()) + route_toml("a.>", {"c"});
  {
    gateway_fixture open_to_loopback(routes);
    const auto from_2 = http_get(open_to_loopback.metrics_port, "/metrics", 5s, "127.0.0.2");
    BOOST_TEST(from_2.status == 200, "the default admits 127.0.0.2, got " << from_2.status);
  }
  gateway_fixture gw(routes, "", {}, true, "allow = [\"127.0.0.1/32\"]\n");
  const auto from_1 = http_get(gw.metrics_port, "/metrics", 5s, "127.0.0.1");
  BOOST_TEST(from_1.status == 200);
  BOOST_TEST(from_1.body.find("gatewayd_build_info") != std::string::npos);
  for (const std::string path : {"/metrics", "/connz", "/routez", "/readyz"}) {
    const auto refused = http_get(gw.metrics_port, path, 5s, "127.0.0.2");
    BOOST_TEST(refused.status == 0, path << " from 127.0.0.2: " << refused.status);
  }
  // Nothing sent: the close is civetweb's own, and orderly (no request to reset it over).
  const auto silent = http_exchange(gw.metrics_port, "", "127.0.0.2");
  BOOST_TEST(silent.connected);
  BOOST_TEST(silent.reply.empty(), silent.reply);
  BOOST_TEST(silent.end == asio::error::eof, silent.end.message());
  const auto line = gw.daemon->wait_for_log("127.0.0.2", 5s);
  BOOST_TEST_REQUIRE(line.has_value());
  BOOST_TEST(line->find("metrics server: ") != std::string::npos, *line);
  BOOST_TEST(line->find("is not allowed to connect") != std::string::npos, *line);
  BOOST_TEST(http_get(gw.metrics_port, "/metrics", 5s, "127.0.0.1").status == 200);
}

// A request is a GET with a few hundred bytes of headers; one larger than civetweb's 4 KiB
// request buffer is refused before any handler runs. civetweb 1.15 answers it 400 ("Malformed
// message": its 413 branch cannot be reached) and closes; before the limit was set, its 16 KiB
// default served this one.
BOOST_AUTO_TEST_CASE(an_over_long_request_is_refused) {
  test_consumer c;
  gateway_fixture gw(consumer_toml("c", c.endpoint()) + route_toml("a.>", {"c"}));
  const std::string head = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n";
  const auto ordinary =
      http_exchange(gw.metrics_port, head + "X-Pad: " + std::string(2000, 'p') + "\r\n\r\n");
  BOOST_TEST(ordinary.reply.rfind("HTTP/1.1 200", 0) == 0u, ordinary.reply.substr(0, 80));
  const auto too_long =
      http_exchange(gw.metrics_port, head + "X-Pad: " + std::string(8000, 'p') + "\r\n\r\n");
  BOOST_TEST(too_long.reply.rfind("HTTP/1.0 400 Bad Request\r\n", 0) == 0u,
             too_long.reply.substr(0, 80) << " (" << too_long.end.message() << ")");
  BOOST_TEST(too_long.reply.find("Malformed message") != std::string::npos,
             too_long.reply.substr(0, 200));
  BOOST_TEST(too_long.reply.find("gatewayd_") == std::string::npos);
  BOOST_TEST(http_get(gw.metrics_port, "/metrics").status == 200);
}
