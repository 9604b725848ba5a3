// TLS against the real daemon, with OpenSSL at the other end of both legs: every suite gatewayd
// offers carries frames supplier -> gateway -> consumer; which record layer each connection got
// is told (metric, /connz, the start-up line); hostile suppliers that handshook and then stream
// records without data, warning alerts, or key update requests they never read are closed,
// counted by reason, and cost the other suppliers nothing.
#include <boost/test/unit_test.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "net/tls_channel.hpp"
#include "protocol/frame_codec.hpp"
#include "tests/support/binaries.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/http_get.hpp"
#include "tests/support/kernel_buffers.hpp"
#include "tests/support/raw_tls_client.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"
#include "tests/support/tls_consumer_peer.hpp"
#include "tests/support/tls_peers.hpp"

using namespace gatewayd::test;
using namespace std::chrono_literals;

namespace {

std::string quoted(const std::filesystem::path& p) {
  return '"' + p.string() + '"';
}

std::string tls_errors(const std::string& leg, const std::string& reason) {
  return "gatewayd_tls_errors_total{leg=\"" + leg + "\",reason=\"" + reason + "\"}";
}

std::string tls_connections(const std::string& leg, const std::string& records) {
  return "gatewayd_tls_connections{leg=\"" + leg + "\",records=\"" + records + "\"}";
}

// What this host gives a TLS 1.3 connection that asks for the kernel's records.
std::string expected_tls13_records() {
  return gatewayd::net::kernel_tls_loaded() ? "kernel-send" : "openssl";
}

std::string frames_of(const std::string& address, int n, int from = 0) {
  std::string frames;
  for (int i = from; i < from + n; ++i)
    frames += gatewayd::protocol::encode_frame(address, "frame " + std::to_string(i));
  return frames;
}

// A gateway with mutual TLS on the supplier listener and one plaintext consumer, `sink`, for
// everything; handshakes time out (and so do suppliers that leave our records unread) after
// `handshake_ms`.
struct tls_gateway {
  pki p;
  test_consumer sink;
  gateway_fixture gw;
  explicit tls_gateway(int handshake_ms = 10000)
      : gw(consumer_toml("sink", sink.endpoint()) + route_toml(">", {"sink"}), "", {}, true,
           p.tls_table(true, "handshake_timeout_ms = " + std::to_string(handshake_ms) + "\n")) {
    BOOST_TEST_REQUIRE(sink.wait_for_connections(1, 5s));
  }
  // A well-behaved supplier's frames still get through.
  void others_unaffected(int from) {
    tls_supplier s(p, "orders");
    BOOST_TEST_REQUIRE(!s.connect(gw.supplier_port));
    const std::size_t before = sink.count();
    BOOST_TEST_REQUIRE(!s.send(frames_of("orders.eu", 100, from)));
    BOOST_TEST(sink.wait_for_count(before + 100, 5s));
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(every_suite_carries_frames_through_both_legs) {
  struct suite {
    const char* name;
    bool tls12;
  };
  const suite suites[] = {{"TLS_AES_128_GCM_SHA256", false},
                          {"TLS_AES_256_GCM_SHA384", false},
                          {"TLS_CHACHA20_POLY1305_SHA256", false},
                          {"ECDHE-ECDSA-AES128-GCM-SHA256", true},
                          {"ECDHE-ECDSA-CHACHA20-POLY1305", true}};
  pki p;
  for (const suite& s : suites) {
    BOOST_TEST_CONTEXT(s.name) {
      // The consumer (an OpenSSL server) accepts only this suite: the gateway's dial must agree.
      tls_test_consumer billing(p, "billing", true, [&s](SSL_CTX* ctx) {
        if (s.tls12) {
          SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
          SSL_CTX_set_cipher_list(ctx, s.name);
        } else {
          SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
          SSL_CTX_set_ciphersuites(ctx, s.name);
        }
      });
      const std::string tls =
          "tls = { ca = " + quoted(p.at("ca.crt")) +
          ", server_name = \"billing.internal\", cert = " + quoted(p.at("gateway.crt")) +
          ", key = " + quoted(p.at("gateway.key")) + " }";
      gateway_fixture gw(
          consumer_toml("billing", billing.endpoint(), tls) + route_toml("orders.>", {"billing"}),
          "", {}, true, p.tls_table(true));
      BOOST_TEST_REQUIRE(gw.consumers_connected({"billing"}));
      // The gateway's side of the handshake may end before the test consumer's handler ran.
      BOOST_TEST_REQUIRE(eventually([&] { return billing.handshakes() >= 1; }, 5s));
      BOOST_TEST(billing.cipher() == s.name);
      // The supplier (an OpenSSL client) offers only this suite too.
      raw_tls_client supplier(p, "orders", s.name, s.tls12);
      BOOST_TEST_REQUIRE(supplier.connect(gw.supplier_port), supplier.why());
      BOOST_TEST(std::string(SSL_get_cipher_name(supplier.ssl())) == s.name);
      BOOST_TEST_REQUIRE(supplier.write(frames_of("orders.eu", 500)));
      BOOST_TEST_REQUIRE(billing.wait_for_count(500, 10s), "got " << billing.count());
      const auto got = billing.payloads();
      BOOST_TEST(got.front() == "frame 0");
      BOOST_TEST(got.back() == "frame 499");
      BOOST_TEST(billing.corruptions() == 0u);
      const std::string records = s.tls12
                                      ? (gatewayd::net::kernel_tls_loaded() ? "kernel" : "openssl")
                                      : expected_tls13_records();
      BOOST_TEST(scrape_metric(gw.metrics_port, tls_connections("supplier", records)) == 1);
      BOOST_TEST(scrape_metric(gw.metrics_port, tls_connections("consumer", records)) == 1);
    }
  }
}

// The record layer each connection got is told three ways: the metric, /connz, and the
// start-up line that says whether the kernel can take records at all (this host's answer).
// ktls = "off" keeps OpenSSL's records whatever the host has.
BOOST_AUTO_TEST_CASE(the_record_layer_is_visible_and_ktls_off_keeps_openssls) {
  pki p;
  tls_test_consumer billing(p, "billing", false);
  const std::string tls = "tls = { ca = " + quoted(p.at("ca.crt")) +
                          ", server_name = \"billing.internal\", ktls = \"off\" }";
  gateway_fixture gw(
      consumer_toml("billing", billing.endpoint(), tls) + route_toml(">", {"billing"}), "", {},
      true, p.tls_table(true));
  BOOST_TEST_REQUIRE(gw.consumers_connected({"billing"}));
  BOOST_TEST(gw.daemon
                 ->wait_for_log(gatewayd::net::kernel_tls_loaded()
                                    ? "kernel TLS: loaded"
                                    : "kernel TLS: not loaded (a TCP socket refused",
                                5s)
                 .has_value());
  tls_supplier s(p, "orders");
  BOOST_TEST_REQUIRE(!s.connect(gw.supplier_port));
  BOOST_TEST(
      wait_metric(gw.metrics_port, tls_connections("supplier", expected_tls13_records()), 1) == 1);
  BOOST_TEST(scrape_metric(gw.metrics_port, tls_connections("consumer", "openssl")) == 1);
  const auto connz = nlohmann::json::parse(http_get(gw.metrics_port, "/connz").body);
  BOOST_TEST(connz["suppliers"]["connections"][0]["tls_records"] == expected_tls13_records());
  BOOST_TEST(connz["consumers"][0]["tls_records"] == "openssl");
}

BOOST_AUTO_TEST_CASE(a_stream_of_empty_records_is_closed_and_counted) {
  tls_gateway t;
  raw_tls_client hostile(t.p, "orders");
  BOOST_TEST_REQUIRE(hostile.connect(t.gw.supplier_port), hostile.why());
  BOOST_TEST_REQUIRE(hostile.forger().ready());
  std::string records;
  for (int i = 0; i < 1000; ++i)
    records += hostile.forger().seal(tls_record_forger::application_data, "");
  hostile.send_raw(records);  // may fail part way: the gateway closes after the 33rd
  BOOST_TEST(hostile.closed_within(5s));
  BOOST_TEST(wait_metric(t.gw.metrics_port, tls_errors("supplier", "unexpected_message"), 1) == 1);
  BOOST_TEST(
      t.gw.daemon->wait_for_log("TLS connection failed (unexpected_message)", 5s).has_value());
  t.others_unaffected(0);
}

BOOST_AUTO_TEST_CASE(a_stream_of_warning_alerts_is_closed_and_counted) {
  tls_gateway t;
  raw_tls_client hostile(t.p, "orders");
  BOOST_TEST_REQUIRE(hostile.connect(t.gw.supplier_port), hostile.why());
  BOOST_TEST_REQUIRE(hostile.forger().ready());
  const std::string user_canceled{1, 90};
  std::string records;
  for (int i = 0; i < 100; ++i)
    records += hostile.forger().seal(tls_record_forger::alert, user_canceled);
  hostile.send_raw(records);
  BOOST_TEST(hostile.closed_within(5s));
  BOOST_TEST(wait_metric(t.gw.metrics_port, tls_errors("supplier", "unexpected_message"), 1) == 1);
  t.others_unaffected(0);
}

BOOST_AUTO_TEST_CASE(a_tampered_record_is_closed_and_counted_as_bad_record_mac) {
  tls_gateway t;
  raw_tls_client hostile(t.p, "orders");
  BOOST_TEST_REQUIRE(hostile.connect(t.gw.supplier_port), hostile.why());
  BOOST_TEST_REQUIRE(hostile.forger().ready());
  std::string record =
      hostile.forger().seal(tls_record_forger::application_data, frames_of("orders.eu", 10));
  record[record.size() - 1] ^= 0x80;  // the tag's last bit
  BOOST_TEST_REQUIRE(hostile.send_raw(record));
  BOOST_TEST(hostile.closed_within(5s));
  BOOST_TEST(wait_metric(t.gw.metrics_port, tls_errors("supplier", "bad_record_mac"), 1) == 1);
  BOOST_TEST(t.sink.count() == 0u);  // nothing of the tampered record was used
}

// A KeyUpdate and frames behind it in one segment: OpenSSL returns from the read after the
// KeyUpdate with the frames' records still in the socket, and no more bytes are coming to wake
// the session for them. It reads on all the same, with or without an answer to send.
BOOST_AUTO_TEST_CASE(frames_right_behind_a_key_update_are_read_without_more_bytes_coming) {
  tls_gateway t;
  raw_tls_client s(t.p, "orders");
  BOOST_TEST_REQUIRE(s.connect(t.gw.supplier_port), s.why());
  BOOST_TEST_REQUIRE(s.key_update_then(frames_of("orders.eu", 10), false));
  BOOST_TEST(t.sink.wait_for_count(10, 5s), "got " << t.sink.count());
  BOOST_TEST_REQUIRE(s.key_update_then(frames_of("orders.eu", 10, 10), true));
  BOOST_TEST(t.sink.wait_for_count(20, 5s), "got " << t.sink.count());
}

// A supplier that keeps asking for key updates and never reads the answers: once the socket is
// full OpenSSL holds one answer and the session waits for room for handshake_timeout_ms, then
// closes it as slow_peer. What the gateway holds for it stays bounded meanwhile.
BOOST_AUTO_TEST_CASE(a_key_update_requester_that_never_reads_is_closed_as_slow) {
  tls_gateway t(500);
  raw_tls_client hostile(t.p, "orders");
  hostile.small_receive_buffer();
  BOOST_TEST_REQUIRE(hostile.connect(t.gw.supplier_port), hostile.why());
  const long rss_before = t.gw.rss_kib();
  // What the kernel holds of the answers it never reads is bounded by the supplier socket's
  // send buffer (supplier_acceptor::send_buffer_bytes, 32 KiB; the kernel counts twice that with
  // its overhead), not by autotuning (about 4 MiB before): the gateway's side of the connection,
  // sampled until the gateway has closed it.
  std::atomic<bool> watching{true};
  std::uint64_t most_held = 0;
  std::thread sampler([&] {
    while (watching.load()) {
      if (const auto q = queues_of_connection_to(t.gw.supplier_port))
        most_held = std::max<std::uint64_t>(most_held, q->returning);
      std::this_thread::sleep_for(5ms);
    }
  });
  // Answers to a few thousand requests fill both sockets (the gateway's and ours); 20,000 are
  // several times that. They go in as fast as the gateway's socket takes them and the gateway
  // works through them at its own pace: a flood without end would take the CPU from a slow
  // gateway (a sanitizer's, next to another test) for as long as our sends found room.
  int requests = 0;
  while (requests < 20'000 && hostile.request_key_update())
    ++requests;  // or until the gateway stops reading us (our send times out) or closes
  // The count before the close: closed_within reads, and reading would give the gateway room to
  // answer the requests still queued for it.
  BOOST_TEST(wait_metric(t.gw.metrics_port, tls_errors("supplier", "slow_peer"), 1, 30s) == 1);
  watching = false;
  sampler.join();
  BOOST_TEST_MESSAGE(requests << " key update requests sent; the gateway's socket held at most "
                              << most_held << " bytes of answers unread");
  // (TCP may queue one segment past the buffer: twice the bound still tells it from megabytes.)
  BOOST_TEST(most_held <= 128u * 1024);
  BOOST_TEST(hostile.closed_within(10s));
  // Release's allocator only: ASan's quarantine keeps what OpenSSL freed after each record (about
  // 8 KiB a request here, some 32 MiB in all), so its RSS counts the work done, not what is held.
  if (!instrumented()) BOOST_TEST(t.gw.rss_kib() < rss_before + 8 * 1024);
  t.others_unaffected(0);
}

// The consumer leg: a TLS consumer whose connection is cut without close_notify is counted
// (truncated) and redialled; one that closes cleanly is not counted.
BOOST_AUTO_TEST_CASE(a_consumer_connection_cut_without_close_notify_is_counted) {
  pki p;
  tls_test_consumer billing(p, "billing", false);
  const std::string tls =
      "tls = { ca = " + quoted(p.at("ca.crt")) + ", server_name = \"billing.internal\" }";
  gateway_fixture gw(consumer_toml("billing", billing.endpoint(), tls) +
                     route_toml(">", {"billing"}));
  BOOST_TEST_REQUIRE(gw.consumers_connected({"billing"}));
  billing.cut_all();
  BOOST_TEST(wait_metric(gw.metrics_port, tls_errors("consumer", "truncated"), 1) == 1);
  BOOST_TEST(eventually([&] { return billing.handshakes() >= 2; }, 10s));
}
