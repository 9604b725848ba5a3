// Certificate and CA rotation under traffic: mTLS suppliers stream numbered frames the whole
// time the gateway's pair and client_ca are replaced and reloaded (SIGHUP, then the file
// watcher); the open connections must lose nothing and the new handshakes must see the change.
#include <boost/test/unit_test.hpp>

#include <openssl/bn.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <list>
#include <map>
#include <string>
#include <thread>

#include "net/tls_context.hpp"
#include "protocol/frame_codec.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"
#include "tests/support/tls_peers.hpp"
#include "tools/traffic/payload.hpp"
#include "tools/traffic/payload_header.hpp"

using namespace gatewayd::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// A certificate's serial number in hex ("" when there is none).
std::string serial_hex(X509* cert) {
  if (!cert) return {};
  BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get_serialNumber(cert), nullptr);
  char* hex = BN_bn2hex(bn);
  std::string out = hex ? hex : "";
  OPENSSL_free(hex);
  BN_free(bn);
  return out;
}

std::string file_serial(const fs::path& pem) {
  std::FILE* f = std::fopen(pem.c_str(), "r");
  if (!f) return {};
  X509* cert = PEM_read_X509(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  const std::string s = serial_hex(cert);
  X509_free(cert);
  return s;
}

// What a new handshake shows of the gateway: "CN serial", or "refused" when the gateway did not
// keep the connection (its handshake failed, or it closed the stream on the first frame).
std::string new_handshake(const pki& p, const std::string& client_cert, unsigned short port) {
  tls_supplier s(p, client_cert);
  if (s.connect(port)) return "refused";
  if (s.send(gatewayd::protocol::encode_frame("probe", "x"))) return "refused";
  if (!s.still_accepted(200ms)) return "refused";
  X509* cert = SSL_get1_peer_certificate(s.stream.native_handle());
  const std::string seen =
      gatewayd::net::tls_peer_identity(s.stream.native_handle()) + " " + serial_hex(cert);
  X509_free(cert);
  return seen;
}

std::string served(const pki& p, const std::string& gateway_cert) {
  const std::string cn = gateway_cert == "gateway" ? "gateway.test" : "gateway2.test";
  return cn + " " + file_serial(p.at(gateway_cert + ".crt"));
}

// Polls new handshakes until one shows `want`, within `timeout`; returns the last seen.
std::string until_served(const pki& p, const std::string& client_cert, unsigned short port,
                         const std::string& want, std::chrono::milliseconds timeout = 10s) {
  std::string seen;
  wait_until([&] { return (seen = new_handshake(p, client_cert, port)) == want; }, timeout, 50ms);
  return seen;
}

std::string failures(const std::string& reason) {
  return "gatewayd_supplier_tls_handshake_failures_total{reason=\"" + reason + "\"}";
}

}  // namespace

// Open connections keep the context they started with (OpenSSL never re-verifies an
// established session, and renegotiation is off): replacing client_ca refuses only new
// handshakes; a supplier whose CA was dropped keeps streaming until it reconnects.
BOOST_AUTO_TEST_CASE(rotation_under_traffic_loses_no_frame) {
  const auto started = std::chrono::steady_clock::now();
  pki p;
  test_consumer sink;
  const auto live = [&](const std::string& from, const std::string& to) {
    // Written beside and renamed over, as a deploy tool does: the watcher sees whole files.
    fs::copy_file(p.at(from), p.at(to + ".tmp"), fs::copy_options::overwrite_existing);
    fs::rename(p.at(to + ".tmp"), p.at(to));
  };
  live("gateway.crt", "live.crt");
  live("gateway.key", "live.key");
  live("ca.crt", "live-ca.crt");
  const std::string tls = tls_table_of(p.at("live.crt"), p.at("live.key"), p.at("live-ca.crt"));
  // A queue deep enough that a reload's pause can never evict: a drop would be a real loss.
  gateway_fixture gw(consumer_toml("sink", sink.endpoint(), "queue_capacity = 1000000\n") +
                         route_toml("stream.>", {"sink"}),
                     "", {}, true, tls);
  BOOST_TEST_REQUIRE(sink.wait_for_connections(1, 5s));
  BOOST_TEST_REQUIRE(new_handshake(p, "orders", gw.supplier_port) == served(p, "gateway"));

  std::list<streaming_supplier> streams;  // std::list: the threads hold `this`
  for (std::uint16_t id = 1; id <= 3; ++id)
    streams.emplace_back(p, "orders", id, gw.supplier_port);
  const auto reloads = [&](const std::string& trigger) {
    return gw.daemon->count_in_log("routing table reloaded (" + trigger + ")");
  };

  // (a) A new pair by SIGHUP.
  const auto by_signal = reloads("SIGHUP");
  live("gateway2.key", "live.key");
  live("gateway2.crt", "live.crt");
  gw.daemon->signal(SIGHUP);
  BOOST_TEST(eventually([&] { return reloads("SIGHUP") > by_signal; }, 10s));
  BOOST_TEST(until_served(p, "orders", gw.supplier_port, served(p, "gateway2")) ==
             served(p, "gateway2"));

  // (a) The first pair back, by the file watcher alone (no signal).
  const auto by_watcher = reloads("file changed");
  live("gateway.key", "live.key");
  live("gateway.crt", "live.crt");
  BOOST_TEST(until_served(p, "orders", gw.supplier_port, served(p, "gateway")) ==
             served(p, "gateway"));
  BOOST_TEST(reloads("file changed") > by_watcher);

  // (b) client_ca = old CA + new CA: both kinds of supplier are served, and a new-CA supplier
  // joins the streams.
  {
    std::ofstream bundle(p.at("bundle.crt"));
    bundle << read_text(p.at("ca.crt").string()) << read_text(p.at("stranger-ca.crt").string());
  }
  live("bundle.crt", "live-ca.crt");
  gw.daemon->signal(SIGHUP);
  BOOST_TEST(until_served(p, "rogue", gw.supplier_port, served(p, "gateway")) ==
             served(p, "gateway"));
  BOOST_TEST(new_handshake(p, "orders", gw.supplier_port) == served(p, "gateway"));
  streams.emplace_back(p, "rogue", 4, gw.supplier_port);

  // (b) client_ca = new CA only: a new old-CA supplier is refused as unknown_ca; the open
  // old-CA connections keep flowing.
  const double unknown_before = scrape_metric(gw.metrics_port, failures("unknown_ca"));
  live("stranger-ca.crt", "live-ca.crt");
  gw.daemon->signal(SIGHUP);
  BOOST_TEST(until_served(p, "orders", gw.supplier_port, "refused") == "refused");
  BOOST_TEST(wait_metric(gw.metrics_port, failures("unknown_ca"), unknown_before + 1) >=
             unknown_before + 1);
  BOOST_TEST(new_handshake(p, "rogue", gw.supplier_port) == served(p, "gateway"));
  std::map<std::uint16_t, std::uint64_t> before_switch;
  for (const auto& s : streams)
    before_switch[s.sender] = s.sent.load();

  // A mismatched pair: the reload fails, names the file and the reason, and new handshakes
  // still get the running certificate.
  const std::string reload_failures = "gatewayd_config_reloads_total{result=\"failure\"}";
  const double failed_before = scrape_metric(gw.metrics_port, reload_failures);
  live("orders.key", "live.key");
  gw.daemon->signal(SIGHUP);
  BOOST_TEST(wait_metric(gw.metrics_port, reload_failures, failed_before + 1, 10s) >=
             failed_before + 1);
  const auto logged = gw.daemon->wait_for_log("does not match the certificate", 5s);
  BOOST_TEST_REQUIRE(logged.has_value());
  BOOST_TEST(logged->find(p.at("live.key").string()) != std::string::npos, *logged);
  BOOST_TEST(new_handshake(p, "rogue", gw.supplier_port) == served(p, "gateway"));

  // Every open connection, old CA included, kept streaming through all of it: each sends past
  // where it was before the switch; a wait that runs out shows in the checks below.
  (void)eventually(
      [&] {
        for (const auto& s : streams)
          if (s.failed.load() || s.sent.load() <= before_switch[s.sender]) return false;
        return true;
      },
      10s);
  // Each stream ends with a marker frame on its own connection: a connection's frames reach
  // the sink in order (checked below), so once every marker is in, nothing more of theirs is
  // on its way, and a duplicate or stray frame is already among what arrived.
  const std::string marker = "end of stream";
  std::uint64_t total = 0;
  for (auto& s : streams) {
    s.halt();
    BOOST_TEST(!s.failed.load(), "supplier " << s.sender << " lost its connection");
    BOOST_TEST(s.sent.load() > before_switch[s.sender], "supplier " << s.sender << " stalled");
    total += s.sent.load();
    BOOST_TEST_REQUIRE(!s.link.send(
        gatewayd::protocol::encode_frame("stream." + std::to_string(s.sender), marker)));
  }
  BOOST_TEST_REQUIRE(sink.wait_for_payload(marker, streams.size(), 10s),
                     sink.count_payload(marker) << " of " << streams.size() << " markers");
  std::vector<received_frame> got;
  for (auto& f : sink.frames())
    if (f.payload != marker) got.push_back(std::move(f));
  BOOST_TEST(got.size() == total);
  BOOST_TEST(sink.corruptions() == 0u);
  std::map<std::uint16_t, std::uint64_t> next;  // per supplier: exactly 0, 1, 2, ... in order
  std::size_t out_of_order = 0;
  for (const auto& f : got) {
    BOOST_TEST_REQUIRE(f.payload.size() >= gatewayd::traffic::header_size);
    const auto h = gatewayd::traffic::load_header(f.payload.data());
    if (h.sequence != next[h.sender]++) ++out_of_order;
  }
  BOOST_TEST(out_of_order == 0u);
  BOOST_TEST_MESSAGE(total << " frames from " << streams.size()
                           << " suppliers, all delivered in order");
  for (const auto& s : streams)
    BOOST_TEST(next[s.sender] == s.sent.load(), "supplier " << s.sender);
  for (const std::string reason :
       {"queue_full", "queue_bytes", "global_bytes", "slow_consumer", "removed", "shutdown"}) {
    const double d = scrape_metric(gw.metrics_port,
                                   "gatewayd_consumer_dropped_messages_total{"
                                   "consumer=\"sink\",reason=\"" +
                                       reason + "\"}");
    BOOST_TEST(d == 0, reason << " " << d);
  }
  BOOST_TEST(scrape_metric(gw.metrics_port,
                           "gatewayd_supplier_dropped_messages_total{"
                           "supplier=\"default\",reason=\"not_permitted\"}") == 0);
  BOOST_TEST((std::chrono::steady_clock::now() - started < 30s));
}

// A deploy that writes the new pair to new files and points gatewayd.toml at them: the reload
// moves the listener to the new paths (client_ca added with them) with no restart, and the open
// connection loses nothing. Removing [tls] would turn TLS off: the reload says that takes a
// restart, and the listener keeps TLS.
BOOST_AUTO_TEST_CASE(new_tls_paths_apply_with_a_reload_turning_tls_off_takes_a_restart) {
  pki p;
  test_consumer sink;
  gateway_fixture gw(consumer_toml("sink", sink.endpoint()) + route_toml("stream.>", {"sink"}), "",
                     {}, true, tls_table_of(p.at("gateway.crt"), p.at("gateway.key")));
  BOOST_TEST_REQUIRE(sink.wait_for_connections(1, 5s));
  BOOST_TEST_REQUIRE(new_handshake(p, "", gw.supplier_port) == served(p, "gateway"));
  streaming_supplier stream(p, "", 1, gw.supplier_port);

  const auto rewrite = [&](const std::string& tables) {
    const std::string config = gw.config.substr(0, gw.config.find("\n[tls]")) + tables;
    std::ofstream(gw.config_path() + ".tmp") << config;
    fs::rename(gw.config_path() + ".tmp", gw.config_path());
  };
  const auto reloads = [&] { return gw.daemon->count_in_log("routing table reloaded"); };
  // The watcher sees gatewayd.toml change: that one reload must serve the new pair at once.
  const auto before = reloads();
  rewrite(tls_table_of(p.at("gateway2.crt"), p.at("gateway2.key"), p.at("ca.crt")));
  BOOST_TEST_REQUIRE(eventually([&] { return reloads() > before; }, 10s));
  BOOST_TEST(gw.daemon->count_in_log("reloaded from " + p.at("gateway2.crt").string()) == 1u);
  BOOST_TEST(new_handshake(p, "orders", gw.supplier_port) == served(p, "gateway2"));
  BOOST_TEST(new_handshake(p, "", gw.supplier_port) == "refused");  // client_ca now asks
  BOOST_TEST(gw.daemon->count_in_log("needs a restart") == 0u);

  const auto before_off = reloads();
  rewrite("\n");
  BOOST_TEST_REQUIRE(eventually([&] { return reloads() > before_off; }, 10s));
  const auto warned = gw.daemon->wait_for_log("tls.cert changed from", 5s);
  BOOST_TEST_REQUIRE(warned.has_value());
  BOOST_TEST(warned->find("needs a restart") != std::string::npos, *warned);
  BOOST_TEST(new_handshake(p, "orders", gw.supplier_port) == served(p, "gateway2"));

  stream.halt();
  BOOST_TEST(!stream.failed.load());
  BOOST_TEST_REQUIRE(sink.wait_for_count(stream.sent.load(), 10s),
                     sink.count() << " of " << stream.sent.load());
  BOOST_TEST(sink.corruptions() == 0u);
}
