// The handshake slots under a flood (issue 42, item 2), through the real daemon with mTLS: at
// max_handshaking_connections a connection that has sent nothing never takes the slot of a
// handshake under way, and a host over its share of the slots evicts only its own connections.
// The supplier is real (OpenSSL, a client certificate) and slow: its handshake waits in its
// client-certificate step (a remote site, an HSM) until the test's flood has come and been
// evicted, then finishes and streams. Before, the oldest handshake went, whatever progress it
// had made: the flood evicted the supplier every time.
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "protocol/frame_codec.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/raw_suppliers.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"
#include "tests/support/tls_peers.hpp"

using namespace gatewayd::test;
using namespace std::chrono_literals;

namespace {

// A TCP connection to 127.0.0.1:`port` from `source` (every 127/8 address is this host's, so a
// test can be two hosts); -1 when it failed.
int dial_from(const char* source, unsigned short port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// An mTLS supplier from 127.0.0.1 on a blocking socket, in a thread of its own: its handshake
// stops in the client-certificate step (the gateway has read its ClientHello and answered)
// until go(); then it sends one frame.
class slow_supplier {
 public:
  slow_supplier(const pki& p, const std::string& name) : p_(p), name_(name) {}
  ~slow_supplier() {
    go();
    if (thread_.joinable()) thread_.join();
  }

  void start(unsigned short port, const std::string& frame) {
    thread_ = std::thread([this, port, frame] { run(port, frame); });
  }
  bool waiting_in_handshake(std::chrono::milliseconds timeout) const {
    return eventually([&] { return waiting_.load(); }, timeout);
  }
  void go() { go_ = true; }
  // "written" once its handshake finished and its frame was written; else why not.
  std::string outcome(std::chrono::milliseconds timeout) {
    if (!eventually([&] { return done_.load(); }, timeout)) return "still in its handshake";
    return outcome_;
  }

 private:
  static int certificate_step(SSL* ssl, X509** cert, EVP_PKEY** key) {
    auto* self = static_cast<slow_supplier*>(SSL_get_app_data(ssl));
    self->waiting_ = true;
    eventually([&] { return self->go_.load(); }, 60s);  // the slow step: until the test says
    FILE* c = std::fopen(self->p_.at(self->name_ + ".crt").c_str(), "r");
    FILE* k = std::fopen(self->p_.at(self->name_ + ".key").c_str(), "r");
    *cert = c ? PEM_read_X509(c, nullptr, nullptr, nullptr) : nullptr;
    *key = k ? PEM_read_PrivateKey(k, nullptr, nullptr, nullptr) : nullptr;
    if (c) std::fclose(c);
    if (k) std::fclose(k);
    return *cert && *key ? 1 : 0;
  }

  void run(unsigned short port, const std::string& frame) {
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(ctx, p_.at("ca.crt").c_str(), nullptr);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    SSL_CTX_set_client_cert_cb(ctx, &slow_supplier::certificate_step);
    const int fd = dial_from("127.0.0.1", port);
    timeval limit{30, 0};  // never hangs on a blocking call
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    SSL* ssl = SSL_new(ctx);
    SSL_set_app_data(ssl, this);
    SSL_set_fd(ssl, fd);
    std::size_t n = 0;
    std::string why;
    if (fd < 0) {
      why = "connect failed";
    } else if (SSL_connect(ssl) != 1) {
      why = "handshake failed";
    } else if (SSL_write_ex(ssl, frame.data(), frame.size(), &n) != 1 || n != frame.size()) {
      why = "write failed";
    } else {
      // TLS 1.3: the client's handshake ends with its own Finished, before the gateway has
      // checked anything, and a write may still reach a socket the gateway closed: whether the
      // frame got through is the sink's to say.
      why = "written";
    }
    outcome_ = why;
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    if (fd >= 0) ::close(fd);
    done_ = true;
  }

  const pki& p_;
  std::string name_;
  std::thread thread_;
  std::atomic<bool> waiting_{false}, go_{false}, done_{false};
  std::string outcome_;
};

constexpr int cap = 32;     // max_handshaking_connections: a source's share is 8
constexpr int flood = 100;  // connections per try: three times the cap

struct fixture {
  // The supplier's writes may meet a connection the gateway closed (before the change, always):
  // an error to report, not a signal that ends the test.
  fixture() { std::signal(SIGPIPE, SIG_IGN); }
  pki p;
  test_consumer sink;
  gateway_fixture gw{consumer_toml("sink", sink.endpoint()) + route_toml("orders.>", {"sink"}),
                     "max_handshaking_connections = " + std::to_string(cap) + "\n",
                     {},
                     true,
                     p.tls_table(true, "handshake_timeout_ms = 30000\n")};
  const std::string evicted =
      "gatewayd_supplier_connections_closed_total{reason=\"handshake_evicted\"}";

  // The supplier starts its handshake and waits in it; `from` opens `flood` connections (each
  // sending `first_bytes`, if any) and the gateway evicts all but the cap's worth; then the
  // supplier finishes. True when its frame (the n-th of the sink's) got through.
  bool supplier_through_a_flood(const char* from, const std::string& first_bytes, std::size_t n) {
    const std::string frame =
        gatewayd::protocol::encode_frame("orders.eu.created", "after flood " + std::to_string(n));
    slow_supplier s(p, "orders");
    s.start(gw.supplier_port, frame);
    BOOST_TEST_REQUIRE(s.waiting_in_handshake(10s));
    const double before = scrape_metric(gw.metrics_port, evicted);
    std::vector<int> fds;
    struct closing {
      std::vector<int>& fds;
      ~closing() { close_all(fds); }
    } close_fds{fds};
    for (int i = 0; i < flood; ++i) {
      const int fd = dial_from(from, gw.supplier_port);
      BOOST_TEST_REQUIRE(fd >= 0);
      if (!first_bytes.empty()) BOOST_TEST_REQUIRE(send_all(fd, first_bytes));
      fds.push_back(fd);
    }
    // Every one of them met the cap: what does not fit has been evicted (the supplier, before).
    BOOST_TEST_REQUIRE(wait_metric(gw.metrics_port, evicted, before + flood - (cap - 1), 20s) >=
                       before + flood - (cap - 1));
    s.go();
    const std::string outcome = s.outcome(20s);
    BOOST_TEST_MESSAGE("the supplier after a flood from " << from << ": " << outcome);
    if (!sink.wait_for_count(n, 10s)) return false;
    return sink.frames().back().payload == "after flood " + std::to_string(n);
  }
};

}  // namespace

// A silent flood from another host: the supplier's handshake under way keeps its slot.
BOOST_FIXTURE_TEST_CASE(a_silent_flood_from_another_host_keeps_no_supplier_out, fixture) {
  BOOST_TEST_REQUIRE(sink.wait_for_connections(1, 5s));
  BOOST_TEST(supplier_through_a_flood("127.0.0.2", "", 1));
  // The same again: the flood's connections from before were evicted or are still there.
  BOOST_TEST(supplier_through_a_flood("127.0.0.2", "", 2));
}

// A silent flood from the supplier's own host: the host is over its share and gives up its own
// connections, silent ones first: never the one under way.
BOOST_FIXTURE_TEST_CASE(a_silent_flood_from_the_same_host_evicts_only_silent_ones, fixture) {
  BOOST_TEST_REQUIRE(sink.wait_for_connections(1, 5s));
  BOOST_TEST(supplier_through_a_flood("127.0.0.1", "", 1));
}

// A flood whose connections each send a first byte (handshakes under way, never finished) from
// another host: that host is over its share and evicts only its own.
BOOST_FIXTURE_TEST_CASE(a_flood_of_started_handshakes_from_one_host_evicts_only_its_own, fixture) {
  BOOST_TEST_REQUIRE(sink.wait_for_connections(1, 5s));
  BOOST_TEST(supplier_through_a_flood("127.0.0.2", std::string("\x16\x03\x01", 3), 1));
}
