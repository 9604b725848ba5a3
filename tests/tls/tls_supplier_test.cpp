// TLS on the supplier listener, end to end: the real daemon with [tls], a CA and certificates
// that the openssl CLI makes in a temp dir at run time, and real TLS clients on 127.0.0.1.
#include <boost/test/unit_test.hpp>

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "net/tls_context.hpp"
#include "protocol/frame_codec.hpp"
#include "tests/support/binaries.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/raw_suppliers.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"
#include "tests/support/tls_peers.hpp"

using namespace gatewayd::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

std::string failures(const std::string& reason) {
  return "gatewayd_supplier_tls_handshake_failures_total{reason=\"" + reason + "\"}";
}

// `gatewayd --check` on a config: exit status and what it printed.
std::pair<int, std::string> check(const fs::path& config) {
  const std::string cmd = gatewayd_binary() + " --check --config " + config.string() + " 2>&1";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  BOOST_TEST_REQUIRE(p != nullptr);
  char buf[512];
  while (std::fgets(buf, sizeof buf, p))
    out += buf;
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace

BOOST_AUTO_TEST_CASE(mtls_supplier_is_accepted_and_routed) {
  pki p;
  test_consumer orders;
  gateway_fixture gw(
      consumer_toml("orders", orders.endpoint()) + route_toml("orders.>", {"orders"}), "", {}, true,
      p.tls_table(true));
  BOOST_TEST_REQUIRE(orders.wait_for_connections(1, 5s));
  tls_supplier s(p, "orders");
  BOOST_TEST_REQUIRE(!s.connect(gw.supplier_port));
  std::string frames;
  for (int i = 0; i < 200; ++i)
    frames += gatewayd::protocol::encode_frame("orders.eu.created", "payload " + std::to_string(i));
  BOOST_TEST_REQUIRE(!s.send(frames));
  BOOST_TEST_REQUIRE(orders.wait_for_count(200, 5s));
  const auto got = orders.frames();
  BOOST_TEST(got.front().payload == "payload 0");
  BOOST_TEST(got.back().payload == "payload 199");
  BOOST_TEST(orders.corruptions() == 0u);
  BOOST_TEST(wait_metric(gw.metrics_port, "gatewayd_supplier_tls_handshakes_total", 1) == 1);
  const auto expiry =
      scrape_metric(gw.metrics_port, "gatewayd_tls_certificate_expiry_timestamp_seconds{file=\"" +
                                         p.at("gateway.crt").string() + "\"}");
  const auto now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  BOOST_TEST(expiry > now + 29 * 86400.0);
  BOOST_TEST(expiry < now + 31 * 86400.0);
  // A gateway that stops says goodbye with close_notify: the supplier tells that from a cut.
  gw.daemon->signal(SIGTERM);
  BOOST_TEST(s.refused_on_read());
  BOOST_TEST((SSL_get_shutdown(s.stream.native_handle()) & SSL_RECEIVED_SHUTDOWN) != 0);
  BOOST_TEST(gw.daemon->wait_exit(10s).value_or(-1) == 0);
}

// The gateway chooses the suite (Mozilla's intermediate profile, AES-128-GCM first): a client
// that prefers AES-256-GCM, as OpenSSL's defaults do, gets AES-128-GCM, which costs less CPU
// per byte. A TLS 1.2 client offering only CBC suites is refused; one offering an AEAD suite
// with forward secrecy is served.
BOOST_AUTO_TEST_CASE(the_gateway_picks_aes_128_gcm_and_refuses_cbc_suites) {
  pki p;
  test_consumer sink;
  gateway_fixture gw(consumer_toml("sink", sink.endpoint()) + route_toml(">", {"sink"}), "", {},
                     true, p.tls_table(false));
  tls_supplier modern(p, "");
  BOOST_TEST_REQUIRE(!modern.connect(gw.supplier_port));
  BOOST_TEST(std::string{SSL_get_cipher_name(modern.stream.native_handle())} ==
             "TLS_AES_128_GCM_SHA256");

  const auto tls12_with = [&](const char* suites) {
    tls_supplier s(p, "");
    SSL* ssl = s.stream.native_handle();
    SSL_set_max_proto_version(ssl, TLS1_2_VERSION);
    BOOST_TEST_REQUIRE(SSL_set_cipher_list(ssl, suites) == 1);
    const auto ec = s.connect(gw.supplier_port);
    return ec ? std::string{"refused"} : std::string{SSL_get_cipher_name(ssl)};
  };
  BOOST_TEST(tls12_with("ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA384") == "refused");
  BOOST_TEST(tls12_with("ECDHE-ECDSA-AES256-GCM-SHA384") == "ECDHE-ECDSA-AES256-GCM-SHA384");
  BOOST_TEST(tls12_with("ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256") ==
             "ECDHE-ECDSA-AES128-GCM-SHA256");
}

// Many frames in one big write arrive as many TLS records at once: every one is read even
// though the kernel has nothing more to say (OpenSSL holds what it took off the socket).
BOOST_AUTO_TEST_CASE(large_bursts_over_tls_lose_nothing) {
  pki p;
  test_consumer sink;
  gateway_fixture gw(consumer_toml("sink", sink.endpoint()) + route_toml(">", {"sink"}), "", {},
                     true, p.tls_table(false));
  BOOST_TEST_REQUIRE(sink.wait_for_connections(1, 5s));
  tls_supplier s(p, "");
  BOOST_TEST_REQUIRE(!s.connect(gw.supplier_port));
  std::string frames;
  const std::string payload(3000, 'x');
  for (int i = 0; i < 5000; ++i)
    frames += gatewayd::protocol::encode_frame("a.b", payload);
  BOOST_TEST_REQUIRE(!s.send(frames));
  BOOST_TEST(sink.wait_for_count(5000, 10s));
  BOOST_TEST(sink.corruptions() == 0u);
}

// The identity of a verified supplier: its subject CN, else its first SAN DNS name.
BOOST_AUTO_TEST_CASE(the_identity_is_the_cn_else_the_first_san_dns_name) {
  pki p;
  test_consumer sink;
  gateway_fixture gw(consumer_toml("sink", sink.endpoint()) + route_toml(">", {"sink"}), "", {},
                     true, p.tls_table(true) + "\n[log]\nlevel = \"debug\"\n");
  tls_supplier orders(p, "orders");
  BOOST_TEST_REQUIRE(!orders.connect(gw.supplier_port));
  BOOST_TEST_REQUIRE(!orders.send(gatewayd::protocol::encode_frame("a.b", "1")));
  tls_supplier billing(p, "billing");
  BOOST_TEST_REQUIRE(!billing.connect(gw.supplier_port));
  BOOST_TEST_REQUIRE(!billing.send(gatewayd::protocol::encode_frame("a.b", "2")));
  BOOST_TEST(sink.wait_for_count(2, 5s));
  BOOST_TEST(gw.daemon->wait_for_log("identity \"orders-svc\"", 5s).has_value());
  BOOST_TEST(gw.daemon->wait_for_log("identity \"billing.internal\"", 5s).has_value());
}

BOOST_AUTO_TEST_CASE(no_certificate_unknown_ca_and_expired_are_refused_by_reason) {
  pki p;
  test_consumer orders;
  gateway_fixture gw(
      consumer_toml("orders", orders.endpoint()) + route_toml("orders.>", {"orders"}), "", {}, true,
      p.tls_table(true));
  struct attempt {
    std::string cert, reason;
  };
  for (const attempt& a : {attempt{"", "no_certificate"}, attempt{"rogue", "unknown_ca"},
                           attempt{"expired", "expired"}}) {
    BOOST_TEST_CONTEXT("client certificate '" << a.cert << "'") {
      tls_supplier s(p, a.cert);
      const auto ec = s.connect(gw.supplier_port);
      if (!ec) {
        s.send(gatewayd::protocol::encode_frame("orders.eu.created", "must not pass"));
        BOOST_TEST(s.refused_on_read());
      }
      BOOST_TEST(wait_metric(gw.metrics_port, failures(a.reason), 1) == 1);
    }
  }
  std::this_thread::sleep_for(200ms);
  BOOST_TEST(orders.count() == 0u);
  BOOST_TEST(scrape_metric(gw.metrics_port, "gatewayd_supplier_tls_handshakes_total") == 0);
  BOOST_TEST(gw.daemon->count_in_log("TLS handshake failed") >= 1u);
}

BOOST_AUTO_TEST_CASE(a_silent_peer_meets_the_handshake_deadline) {
  pki p;
  test_consumer sink;
  gateway_fixture gw(consumer_toml("sink", sink.endpoint()) + route_toml(">", {"sink"}), "", {},
                     true, p.tls_table(false, "handshake_timeout_ms = 300\n"));
  asio::io_context ioc;
  asio::ip::tcp::socket silent(ioc);
  silent.connect({asio::ip::make_address("127.0.0.1"), gw.supplier_port});
  const auto started = std::chrono::steady_clock::now();
  std::error_code ec;
  char byte;
  silent.read_some(asio::buffer(&byte, 1), ec);  // the gateway closes: EOF
  BOOST_TEST(static_cast<bool>(ec));
  BOOST_TEST((std::chrono::steady_clock::now() - started < 3s));
  BOOST_TEST(wait_metric(gw.metrics_port, failures("timeout"), 1) == 1);
}

namespace {

// Connects an mTLS supplier until one is admitted (a refused one sees its handshake fail) and
// sends a frame; how long until the consumer had it, or nothing within `within`.
std::optional<std::chrono::milliseconds> through(const pki& p, const gateway_fixture& gw,
                                                 test_consumer& sink,
                                                 std::chrono::milliseconds within) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 t0);
  };
  while (elapsed() < within) {
    tls_supplier s(p, "orders");
    if (!s.connect(gw.supplier_port) &&
        !s.send(gatewayd::protocol::encode_frame("orders.x", "through")) &&
        sink.wait_for_count(1, within - elapsed())) {
      return elapsed();
    }
    std::this_thread::sleep_for(20ms);
  }
  return std::nullopt;
}

}  // namespace

// Issue 29 point 4: connections still in their TLS handshake counted against
// max_supplier_connections: 20 TCP connections that never send a ClientHello kept a real mTLS
// supplier out for 9.8 s (until handshake_timeout_ms ended them). A handshake holds no place
// now: the supplier gets through at once.
BOOST_AUTO_TEST_CASE(silent_handshakes_never_keep_an_mtls_supplier_out) {
  raise_fd_limit();
  pki p;
  test_consumer sink;
  gateway_fixture gw(consumer_toml("sink", sink.endpoint()) + route_toml("orders.>", {"sink"}),
                     "max_supplier_connections = 20\n", {}, true,
                     p.tls_table(true, "handshake_timeout_ms = 10000\n"));
  BOOST_TEST_REQUIRE(sink.wait_for_connections(1, 5s));
  std::vector<int> silent;
  for (int i = 0; i < 25; ++i)
    silent.push_back(dial(gw.supplier_port));
  BOOST_TEST_REQUIRE(eventually(
      [&] { return scrape_metric(gw.metrics_port, "gatewayd_supplier_connections") >= 20; }, 5s));
  const auto took = through(p, gw, sink, 2s);
  BOOST_TEST_MESSAGE("an mTLS supplier behind 25 silent handshakes (cap 20): "
                     << (took ? std::to_string(took->count()) + " ms" : "not within 2 s")
                     << "; refused: "
                     << scrape_metric(gw.metrics_port,
                                      "gatewayd_supplier_connections_closed_total{reason="
                                      "\"connection_limit\"}"));
  BOOST_TEST(took.has_value());
  // The silent ones are still there, in their handshake (none was evicted under the default cap).
  BOOST_TEST(!is_closed(silent.front()));
  close_all(silent);
}

// At max_handshaking_connections a new connection evicts the oldest still in its handshake,
// counted by reason; a real supplier's handshake is the newest, and finishes.
BOOST_AUTO_TEST_CASE(the_oldest_handshake_gives_its_slot_to_a_new_connection) {
  pki p;
  test_consumer sink;
  gateway_fixture gw(consumer_toml("sink", sink.endpoint()) + route_toml("orders.>", {"sink"}),
                     "max_supplier_connections = 20\nmax_handshaking_connections = 8\n", {}, true,
                     p.tls_table(true, "handshake_timeout_ms = 10000\n"));
  BOOST_TEST_REQUIRE(sink.wait_for_connections(1, 5s));
  const std::string evicted =
      "gatewayd_supplier_connections_closed_total{reason=\"handshake_evicted\"}";
  std::vector<int> silent;
  for (int i = 0; i < 12; ++i)
    silent.push_back(dial(gw.supplier_port));
  BOOST_TEST(wait_metric(gw.metrics_port, evicted, 4) == 4);
  BOOST_TEST(scrape_metric(gw.metrics_port, "gatewayd_supplier_handshaking_connections") == 8);
  // The first four went, oldest first; the last eight wait in their handshake.
  BOOST_TEST(all_closed_within({silent.begin(), silent.begin() + 4}, 2s));
  for (std::size_t i = 4; i < silent.size(); ++i)
    BOOST_TEST(!is_closed(silent[i]), "connection " << i);
  BOOST_TEST(through(p, gw, sink, 2s).has_value());
  BOOST_TEST(wait_metric(gw.metrics_port, evicted, 5) == 5);
  BOOST_TEST(gw.daemon->wait_for_log("(handshake_evicted)", 2s).has_value(), gw.daemon->log());
  close_all(silent);
}

BOOST_AUTO_TEST_CASE(check_validates_the_pair_and_the_ca) {
  pki p;
  temp_dir d;
  d.write("routes.toml", "");
  const auto config = [&](const std::string& cert, const std::string& key, const std::string& ca) {
    std::string t = "[gateway]\nroutes_file = \"routes.toml\"\n[tls]\ncert = \"" +
                    p.at(cert).string() + "\"\nkey = \"" + p.at(key).string() + "\"\n";
    if (!ca.empty()) t += "client_ca = \"" + p.at(ca).string() + "\"\n";
    return d.write("gatewayd.toml", t);
  };
  auto [ok, out] = check(config("gateway.crt", "gateway.key", "ca.crt"));
  BOOST_TEST(ok == 0, out);

  auto [mismatch, why] = check(config("gateway.crt", "orders.key", "ca.crt"));
  BOOST_TEST(mismatch == 1);
  BOOST_TEST(why.find(p.at("orders.key").string()) != std::string::npos, why);
  BOOST_TEST(why.find("does not match") != std::string::npos, why);

  auto [missing, said] = check(config("gateway.crt", "gateway.key", "nowhere.crt"));
  BOOST_TEST(missing == 1);
  BOOST_TEST(said.find(p.at("nowhere.crt").string()) != std::string::npos, said);

  auto [not_pem, told] = check(config("gateway.csr", "gateway.key", ""));
  BOOST_TEST(not_pem == 1);
  BOOST_TEST(told.find(p.at("gateway.csr").string()) != std::string::npos, told);

  // Relative paths are read from gatewayd.toml's folder.
  fs::copy_file(p.at("gateway.crt"), d.path() / "gw.crt");
  fs::copy_file(p.at("gateway.key"), d.path() / "gw.key");
  d.write("gatewayd.toml",
          "[gateway]\nroutes_file = \"routes.toml\"\n[tls]\ncert = \"gw.crt\"\nkey = \"gw.key\"\n");
  auto [relative, answer] = check(d.path() / "gatewayd.toml");
  BOOST_TEST(relative == 0, answer);
}

// routes.toml's permissions, by the certificate's identity: allow with wildcards, deny wins,
// a supplier matching no [suppliers.*] gets [suppliers_default] (here default-deny), a refused
// frame is dropped and counted while the connection stays, and a reload swaps the rules with
// the table.
// Rotation without a restart: the certificate, key and CA are reloaded on file change and
// SIGHUP, validated first (a key that does not match keeps the running context), new
// connections get the new context and open ones keep working.
BOOST_AUTO_TEST_CASE(certificates_and_ca_reload_and_a_bad_pair_keeps_the_running_context) {
  pki p;
  test_consumer sink;
  const auto live = [&](const std::string& from, const std::string& to) {
    fs::copy_file(p.at(from), p.at(to), fs::copy_options::overwrite_existing);
  };
  live("gateway.crt", "live.crt");
  live("gateway.key", "live.key");
  live("ca.crt", "live-ca.crt");
  const std::string tls = tls_table_of(p.at("live.crt"), p.at("live.key"), p.at("live-ca.crt"));
  // Probes go to "probe", which no route takes: the sink sees only the open connection's frames.
  gateway_fixture gw(consumer_toml("sink", sink.endpoint()) + route_toml("a.>", {"sink"}), "", {},
                     true, tls);
  BOOST_TEST_REQUIRE(sink.wait_for_connections(1, 5s));
  const auto server_name = [&](const std::string& cert) -> std::string {
    tls_supplier s(p, cert);
    if (s.connect(gw.supplier_port)) return "refused";
    if (s.send(gatewayd::protocol::encode_frame("probe", "x"))) return "refused";
    if (!s.still_accepted(300ms)) return "refused";
    return gatewayd::net::tls_peer_identity(s.stream.native_handle());
  };
  tls_supplier open(p, "orders");
  BOOST_TEST_REQUIRE(!open.connect(gw.supplier_port));
  BOOST_TEST(gatewayd::net::tls_peer_identity(open.stream.native_handle()) == "gateway.test");

  // A new pair, written key first: the watcher may see the half-written pair (refused, kept)
  // before the whole one.
  live("gateway2.key", "live.key");
  live("gateway2.crt", "live.crt");
  gw.daemon->signal(SIGHUP);
  BOOST_TEST_REQUIRE(gw.daemon->wait_for_log("certificate, key and CA reloaded", 10s).has_value());
  std::string name;
  BOOST_TEST(
      wait_until([&] { return (name = server_name("orders")) == "gateway2.test"; }, 10s, 50ms),
      name);
  BOOST_TEST_REQUIRE(!open.send(gatewayd::protocol::encode_frame("a.b", "still open")));
  BOOST_TEST(sink.wait_for_count(1, 5s));

  // A key that does not match: the reload fails, named, and the running context stays.
  const auto failures_before =
      scrape_metric(gw.metrics_port, "gatewayd_config_reloads_total{result=\"failure\"}");
  live("orders.key", "live.key");
  gw.daemon->signal(SIGHUP);
  BOOST_TEST(wait_metric(gw.metrics_port, "gatewayd_config_reloads_total{result=\"failure\"}",
                         failures_before + 1, 10s) >= failures_before + 1);
  BOOST_TEST(gw.daemon->wait_for_log("does not match the certificate", 5s).has_value());
  BOOST_TEST(server_name("orders") == "gateway2.test");

  // The CA is part of the context: after a new CA, the old CA's suppliers are refused and the
  // new one's accepted.
  live("gateway2.key", "live.key");
  live("stranger-ca.crt", "live-ca.crt");
  gw.daemon->signal(SIGHUP);
  BOOST_TEST(wait_until([&] { return server_name("rogue") == "gateway2.test"; }, 10s, 50ms));
  tls_supplier old_ca(p, "orders");
  if (!old_ca.connect(gw.supplier_port)) {
    old_ca.send(gatewayd::protocol::encode_frame("a.b", "must not pass"));
    BOOST_TEST(old_ca.refused_on_read());
  }
  BOOST_TEST(wait_metric(gw.metrics_port, failures("unknown_ca"), 1) >= 1);
  BOOST_TEST_REQUIRE(!open.send(gatewayd::protocol::encode_frame("a.b", "open still")));
  BOOST_TEST(sink.wait_for_count(2, 5s));
  BOOST_TEST(sink.frames().back().payload == "open still");
}
