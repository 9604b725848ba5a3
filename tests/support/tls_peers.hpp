// What the TLS tests share: a CA and certificates made with the openssl CLI in a temp dir,
// a blocking TLS supplier on 127.0.0.1 (and one streaming from a thread of its own), and a wait
// for a metric to reach a value.
#pragma once

#include <boost/test/unit_test.hpp>

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "protocol/frame_codec.hpp"
#include "tests/support/daemon_process.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/wait_until.hpp"
#include "tools/traffic/payload.hpp"

namespace gatewayd::test {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

inline void sh(const std::string& command) {
  const std::string quiet = "(" + command + ") >/dev/null 2>&1";
  BOOST_TEST_REQUIRE(std::system(quiet.c_str()) == 0, "failed: " << command);
}

// gatewayd.toml's [tls] table naming these files; no client_ca when `client_ca` is empty.
inline std::string tls_table_of(const fs::path& cert, const fs::path& key,
                                const fs::path& client_ca = {}) {
  std::string t = "\n[tls]\ncert = \"" + cert.string() + "\"\nkey = \"" + key.string() + "\"\n";
  if (!client_ca.empty()) t += "client_ca = \"" + client_ca.string() + "\"\n";
  return t;
}

// A CA, the gateway's certificate, and suppliers' certificates: one the CA signed, one a
// stranger CA signed, one the CA signed that has already expired.
struct pki {
  temp_dir dir;
  fs::path at(const std::string& name) const { return dir.path() / name; }

  pki() {
    const std::string d = dir.path().string();
    const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const auto ca = [&](const std::string& name) {
      sh("cd " + d + " && openssl req -x509" + key + " -keyout " + name + ".key -out " + name +
         ".crt -days 30 -subj /CN=" + name);
    };
    const auto leaf = [&](const std::string& name, const std::string& cn, const std::string& by,
                          int days) {
      // The CN again as a DNS SAN: consumers' names are checked against SANs only.
      sh("cd " + d + " && openssl req" + key + " -keyout " + name + ".key -out " + name +
         ".csr -subj /CN=" + cn + " -addext subjectAltName=DNS:" + cn +
         " && openssl x509 -req -in " + name + ".csr -CA " + by + ".crt -CAkey " + by +
         ".key -CAcreateserial -copy_extensions copy -out " + name + ".crt -days " +
         std::to_string(days));
    };
    ca("ca");
    ca("stranger-ca");
    leaf("gateway", "gateway.test", "ca", 30);
    leaf("gateway2", "gateway2.test", "ca", 60);
    leaf("orders", "orders-svc", "ca", 30);
    leaf("rogue", "orders-svc", "stranger-ca", 30);
    leaf("expired", "orders-svc", "ca", 0);  // notAfter = now: expired a second later
    // No CN: the identity is the first SAN DNS name.
    sh("cd " + d + " && openssl req" + key + " -keyout billing.key -out billing.csr -subj /O=acme" +
       " -addext subjectAltName=DNS:billing.internal,DNS:other.internal && openssl x509 -req" +
       " -in billing.csr -CA ca.crt -CAkey ca.key -CAcreateserial -copy_extensions copy" +
       " -out billing.crt -days 30");
    // The name as a CN only, no SAN (as certificates were made before RFC 6125): refused.
    sh("cd " + d + " && openssl req" + key + " -keyout cn-only.key -out cn-only.csr" +
       " -subj /CN=billing.internal && openssl x509 -req -in cn-only.csr -CA ca.crt -CAkey ca.key" +
       " -CAcreateserial -out cn-only.crt -days 30");
    std::this_thread::sleep_for(1100ms);
  }

  std::string tls_table(bool client_ca, const std::string& extra = "") const {
    return tls_table_of(at("gateway.crt"), at("gateway.key"),
                        client_ca ? at("ca.crt") : fs::path{}) +
           extra;
  }
};

// A supplier over TLS that trusts the test CA, with a client certificate or none.
struct tls_supplier {
  asio::io_context ioc;
  asio::ssl::context ctx;
  // Made once, after the context is complete: Asio 1.28's move assignment of an ssl::stream
  // does not free the SSL object it replaces (LeakSanitizer found one per supplier).
  asio::ssl::stream<asio::ip::tcp::socket> stream;

  tls_supplier(const pki& p, const std::string& cert)
      : ctx(client_context(p, cert)), stream(ioc, ctx) {}

  static asio::ssl::context client_context(const pki& p, const std::string& cert) {
    asio::ssl::context c{asio::ssl::context::tls_client};
    c.load_verify_file(p.at("ca.crt").string());
    c.set_verify_mode(asio::ssl::verify_peer);
    if (!cert.empty()) {
      c.use_certificate_chain_file(p.at(cert + ".crt").string());
      c.use_private_key_file(p.at(cert + ".key").string(), asio::ssl::context::pem);
    }
    return c;
  }

  // Connects and handshakes; the error, if any.
  std::error_code connect(unsigned short port) {
    std::error_code ec;
    stream.lowest_layer().connect({asio::ip::make_address("127.0.0.1"), port}, ec);
    if (!ec) stream.handshake(asio::ssl::stream_base::client, ec);
    return ec;
  }

  std::error_code send(const std::string& bytes) {
    std::error_code ec;
    asio::write(stream, asio::buffer(bytes), ec);
    return ec;
  }

  // True when the gateway has not refused us `after` the handshake (no alert, no close).
  bool still_accepted(std::chrono::milliseconds after) {
    std::this_thread::sleep_for(after);
    stream.lowest_layer().non_blocking(true);
    char byte;
    std::error_code ec;
    stream.read_some(asio::buffer(&byte, 1), ec);
    stream.lowest_layer().non_blocking(false);
    return ec == asio::error::would_block || ec == asio::error::try_again;
  }

  // TLS 1.3 finishes the client's side of the handshake before the server has judged its
  // certificate: a refusal shows on the first read, as an alert or the end of the stream.
  bool refused_on_read() {
    char byte;
    std::error_code ec;
    stream.read_some(asio::buffer(&byte, 1), ec);
    return static_cast<bool>(ec);
  }
};

// One supplier connection writing numbered frames from its own thread until stopped: a few
// frames every few milliseconds, each write whole (blocking), counted once it returned.
struct streaming_supplier {
  tls_supplier link;
  std::uint16_t sender;
  std::atomic<std::uint64_t> sent{0};
  std::atomic<bool> failed{false};
  std::atomic<bool> stop{false};
  std::thread thread;

  streaming_supplier(const pki& p, const std::string& cert, std::uint16_t id, unsigned short port)
      : link(p, cert), sender(id) {
    BOOST_TEST_REQUIRE(!link.connect(port), "supplier " << id << " (" << cert << ") connects");
    thread = std::thread([this] { run(); });
  }
  ~streaming_supplier() { halt(); }

  void halt() {
    stop = true;
    if (thread.joinable()) thread.join();
  }

  void run() {
    std::uint64_t next = 0;
    while (!stop) {
      std::string batch;
      for (int i = 0; i < 8; ++i)
        batch +=
            gatewayd::protocol::encode_frame("stream." + std::to_string(sender),
                                             gatewayd::traffic::numbered_payload(sender, next++));
      if (link.send(batch)) {
        failed = true;
        return;
      }
      sent.store(next, std::memory_order_release);
      std::this_thread::sleep_for(3ms);
    }
  }
};

// Waits until `series` reaches at least `want`; returns its last value.
inline double wait_metric(unsigned short port, const std::string& series, double want,
                          std::chrono::milliseconds timeout = 5s) {
  double v = -1;
  wait_until(
      [&] {
        v = scrape_metric(port, series);
        return v >= want;
      },
      timeout, 20ms);
  return v;
}

}  // namespace gatewayd::test
