// tls_channel against OpenSSL's own TLS at the other end of a loopback connection: a TLS 1.3
// connection's records are tls13_records' once the handshake is done, every byte gets through
// whatever the reader's buffer size, key updates work both ways, a server's tickets are
// skipped, close_notify is understood both ways; a TLS 1.2 peer stays with OpenSSL's records.
// Certificates from the openssl CLI, made at run time.
#define BOOST_TEST_MODULE tls_channel
#include <boost/test/unit_test.hpp>

#include <openssl/ssl.h>
#include <poll.h>

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <chrono>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "net/tls_channel.hpp"
#include "net/tls_context.hpp"
#include "tests/support/tls_peers.hpp"

using namespace gatewayd;
using namespace std::chrono_literals;

namespace {

// Byte `i` of every stream in these tests, so that any byte lost, doubled or moved shows.
char pattern(std::size_t i) {
  return static_cast<char>(i * 131 + i / 251);
}

std::string pattern_run(std::size_t from, std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i)
    s[i] = pattern(from + i);
  return s;
}

// Runs `ioc` until `done()`, for at most 20 s.
template <class Done>
void run_until(asio::io_context& ioc, Done done) {
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (!done() && std::chrono::steady_clock::now() < until) {
    ioc.restart();
    ioc.run_for(5ms);
  }
}

// Waits until `socket` is readable; fails the test after 10 s (a test never hangs).
void wait_readable(asio::ip::tcp::socket& socket) {
  pollfd p{socket.native_handle(), POLLIN, 0};
  BOOST_TEST_REQUIRE(::poll(&p, 1, 10'000) == 1, "nothing to read for 10 s");
}

std::shared_ptr<net::tls_channel> handshaken(asio::io_context& ioc, asio::ip::tcp::socket& socket,
                                             SSL_CTX* ctx, net::tls_channel::side side,
                                             const std::string& server_name = "") {
  std::error_code ec;
  auto channel = net::tls_channel::make(socket, ctx, side, ec);
  BOOST_TEST_REQUIRE(channel != nullptr, ec.message());
  if (!server_name.empty()) {
    const std::string why = net::prepare_tls_client(channel->native_handle(), server_name);
    BOOST_TEST_REQUIRE(why.empty(), why);
  }
  bool done = false;
  channel->async_handshake([&](std::error_code e) {
    ec = e;
    done = true;
  });
  run_until(ioc, [&] { return done; });
  BOOST_TEST_REQUIRE(done);
  BOOST_TEST_REQUIRE(!ec, ec.message());
  return channel;
}

// Reads `total` bytes with read_some through buffers of changing sizes (smaller than a record,
// a record exactly, a record and a byte, many records), waiting whenever it would block.
// Counts the bytes that are not the pattern.
std::size_t read_pattern(net::tls_channel& channel, asio::ip::tcp::socket& socket,
                         std::size_t total) {
  static constexpr std::size_t sizes[] = {1, 7, 100, 16'383, 16'384, 16'385, 65'536, 3};
  std::vector<char> buffer(65'536);
  std::size_t got = 0;
  std::size_t wrong = 0;
  for (std::size_t i = 0; got < total; ++i) {
    std::error_code ec;
    const std::size_t n = channel.read_some(asio::buffer(buffer.data(), sizes[i % 8]), ec);
    if (ec == asio::error::would_block) {
      wait_readable(socket);
      continue;
    }
    BOOST_TEST_REQUIRE(!ec, ec.message() << " after " << got << " bytes");
    for (std::size_t k = 0; k < n; ++k)
      wrong += buffer[k] != pattern(got + k);
    got += n;
  }
  BOOST_TEST(got == total);
  return wrong;
}

// The next read's outcome once it does not block: eof at the peer's close_notify.
std::error_code read_end(net::tls_channel& channel, asio::ip::tcp::socket& socket) {
  char byte;
  for (;;) {
    std::error_code ec;
    const std::size_t n = channel.read_some(asio::buffer(&byte, 1), ec);
    if (ec != asio::error::would_block) return n ? std::error_code{} : ec;
    wait_readable(socket);
  }
}

net::tls_server_context server_context(const test::pki& p) {
  auto c = net::make_tls_server_context({p.at("gateway.crt"), p.at("gateway.key"), p.at("ca.crt")});
  BOOST_TEST_REQUIRE(c.error.empty(), c.error);
  return c;
}
// The gateway's side of a supplier connection: our channel as the TLS server, an OpenSSL
// client (tests/support's tls_supplier) on a thread of its own.
struct server_side {
  test::pki p;
  net::tls_server_context server = server_context(p);
  asio::io_context ioc;
  asio::ip::tcp::acceptor acceptor{ioc, {asio::ip::make_address("127.0.0.1"), 0}};
  asio::ip::tcp::socket socket{ioc};
  std::string peer_error;
  std::thread peer;
  std::shared_ptr<net::tls_channel> channel;

  // `before(ssl)` configures the client; `client(s)` runs once it has connected; meanwhile we
  // accept and handshake.
  template <class Before, class Client>
  void start(Before before, Client client) {
    peer = std::thread([this, port = acceptor.local_endpoint().port(), before, client] {
      test::tls_supplier s(p, "orders");
      before(s.stream.native_handle());
      if (const auto ec = s.connect(port)) {
        peer_error = "connect: " + ec.message();
        return;
      }
      client(s);
    });
    acceptor.accept(socket);
    channel =
        handshaken(ioc, socket, server.context->native_handle(), net::tls_channel::side::server);
  }

  // The client's verdict, once it is done.
  std::string joined_peer_error() {
    peer.join();
    return peer_error;
  }

  ~server_side() {
    socket.close();  // a client still reading gives up
    if (peer.joinable()) peer.join();
  }
};

void no_setup(SSL*) {}

}  // namespace

BOOST_AUTO_TEST_CASE(a_tls13_client_streams_through_our_records_and_key_updates_both_ways) {
  constexpr std::size_t total = 600'000;
  server_side t;
  t.start(no_setup, [&t](test::tls_supplier& s) {
    std::mt19937 rng(7);
    for (std::size_t sent = 0, n = 0; sent < total; sent += n) {
      n = std::min<std::size_t>(total - sent, 1 + rng() % 40'000);
      // Halfway, our key changes and the gateway must answer with its own KeyUpdate.
      if (sent < total / 2 && sent + n >= total / 2) {
        SSL_key_update(s.stream.native_handle(), SSL_KEY_UPDATE_REQUESTED);
      }
      if (const auto ec = s.send(pattern_run(sent, n))) {
        t.peer_error = "send: " + ec.message();
        return;
      }
    }
    // The gateway's close_notify comes after its KeyUpdate, under its new key: reading it
    // needs both right.
    char byte;
    std::error_code ec;
    s.stream.read_some(asio::buffer(&byte, 1), ec);
    if (ec != asio::error::eof) t.peer_error = "expected close_notify, got: " + ec.message();
    s.stream.shutdown(ec);
  });
  BOOST_TEST(t.channel->own_records());
  BOOST_TEST(read_pattern(*t.channel, t.socket, total) == 0u);
  t.channel->close_notify();
  const std::error_code end = read_end(*t.channel, t.socket);
  const std::string peer_error = t.joined_peer_error();
  BOOST_TEST(peer_error.empty(), peer_error);
  BOOST_TEST((end == asio::error::eof), end.message());
}

BOOST_AUTO_TEST_CASE(a_tls13_server_with_tickets_reads_our_batches_across_its_key_update) {
  test::pki p;
  const auto client = net::make_tls_client_context(
      {p.at("ca.crt"), "gateway.test", p.at("orders.crt"), p.at("orders.key")});
  BOOST_TEST_REQUIRE(client.error.empty(), client.error);
  constexpr std::size_t total = 300'000;
  const std::string data = pattern_run(0, total);

  // OpenSSL's server as it comes: two session tickets after the handshake.
  std::promise<unsigned short> listening;
  std::string peer_error;
  std::size_t peer_wrong = 0;
  std::thread peer([&] {
    asio::io_context pio;
    asio::ssl::context ctx(asio::ssl::context::tls_server);
    ctx.use_certificate_chain_file(p.at("gateway.crt").string());
    ctx.use_private_key_file(p.at("gateway.key").string(), asio::ssl::context::pem);
    asio::ip::tcp::acceptor acceptor(pio, {asio::ip::make_address("127.0.0.1"), 0});
    listening.set_value(acceptor.local_endpoint().port());
    asio::ssl::stream<asio::ip::tcp::socket> stream(pio, ctx);
    std::error_code ec;
    acceptor.accept(stream.lowest_layer(), ec);
    if (!ec) stream.handshake(asio::ssl::stream_base::server, ec);
    if (ec) {
      peer_error = "handshake: " + ec.message();
      return;
    }
    const auto read_half = [&](std::size_t from, std::size_t n) {
      std::string got(n, '\0');
      asio::read(stream, asio::buffer(got), ec);
      for (std::size_t i = 0; i < n; ++i)
        peer_wrong += got[i] != pattern(from + i);
    };
    read_half(0, total / 2);
    // Our new key, and the gateway's next batch must come under its own new one.
    SSL_key_update(stream.native_handle(), SSL_KEY_UPDATE_REQUESTED);
    if (!ec) asio::write(stream, asio::buffer("go", 2), ec);
    if (!ec) read_half(total / 2, total - total / 2);
    char byte;
    if (!ec) stream.read_some(asio::buffer(&byte, 1), ec);
    if (ec != asio::error::eof) peer_error = "expected close_notify, got: " + ec.message();
    stream.shutdown(ec);
  });

  asio::io_context ioc;
  asio::ip::tcp::socket socket(ioc);
  socket.connect({asio::ip::make_address("127.0.0.1"), listening.get_future().get()});
  auto channel = handshaken(ioc, socket, client.context->native_handle(),
                            net::tls_channel::side::client, "gateway.test");
  BOOST_TEST(channel->own_records());

  // What the server says: its tickets, its KeyUpdate, "go", then close_notify.
  std::string heard;
  std::error_code read_end;
  std::array<char, 64> discard;
  std::function<void()> read_on = [&] {
    channel->async_read_some(asio::buffer(discard), [&](std::error_code ec, std::size_t n) {
      heard.append(discard.data(), n);
      if (ec) {
        read_end = ec;
        return;
      }
      read_on();
    });
  };
  read_on();

  // Frames of 1 to 3,000 bytes, as a consumer's queue holds them, in two batches.
  std::mt19937 rng(11);
  const auto write_batch = [&](std::size_t from, std::size_t to) {
    std::vector<asio::const_buffer> pieces;
    for (std::size_t at = from, n = 0; at < to; at += n) {
      n = std::min<std::size_t>(to - at, 1 + rng() % 3'000);
      pieces.emplace_back(data.data() + at, n);
    }
    bool written = false;
    std::error_code ec;
    channel->async_write(pieces, [&](std::error_code e, std::size_t n) {
      ec = e;
      BOOST_TEST(n == to - from);
      written = true;
    });
    run_until(ioc, [&] { return written; });
    BOOST_TEST_REQUIRE(written);
    BOOST_TEST_REQUIRE(!ec, ec.message());
  };
  write_batch(0, total / 2);
  run_until(ioc, [&] { return heard == "go" || read_end; });
  BOOST_TEST_REQUIRE(heard == "go", "heard \"" << heard << "\", " << read_end.message());
  write_batch(total / 2, total);
  channel->close_notify();
  run_until(ioc, [&] { return static_cast<bool>(read_end); });
  peer.join();
  BOOST_TEST(peer_error.empty(), peer_error);
  BOOST_TEST(peer_wrong == 0u);
  BOOST_TEST((read_end == asio::error::eof), read_end.message());
}

BOOST_AUTO_TEST_CASE(a_tls12_client_stays_with_openssls_records) {
  constexpr std::size_t total = 100'000;
  server_side t;
  t.start([](SSL* ssl) { SSL_set_max_proto_version(ssl, TLS1_2_VERSION); },
          [&t](test::tls_supplier& s) {
            if (const auto ec = s.send(pattern_run(0, total)))
              t.peer_error = "send: " + ec.message();
            std::error_code ec;
            s.stream.shutdown(ec);
          });
  BOOST_TEST(!t.channel->own_records());
  BOOST_TEST(std::string(SSL_get_version(t.channel->native_handle())) == "TLSv1.2");
  BOOST_TEST(read_pattern(*t.channel, t.socket, total) == 0u);
  const std::error_code end = read_end(*t.channel, t.socket);
  t.channel->close_notify();  // the peer's shutdown waits for it
  const std::string peer_error = t.joined_peer_error();
  BOOST_TEST(peer_error.empty(), peer_error);
  BOOST_TEST((end == asio::error::eof), end.message());
}

BOOST_AUTO_TEST_CASE(key_updates_without_data_between_them_end_the_connection_after_32) {
  server_side t;
  t.start(no_setup, [&t](test::tls_supplier& s) {
    SSL* ssl = s.stream.native_handle();
    // Each KeyUpdate waits in Asio's engine until the next write carries it out.
    const auto updates_then = [&](int updates, std::size_t from, std::size_t n) {
      for (int i = 0; i < updates; ++i) {
        SSL_key_update(ssl, SSL_KEY_UPDATE_NOT_REQUESTED);
        SSL_do_handshake(ssl);
      }
      if (const auto ec = s.send(pattern_run(from, n))) t.peer_error = "send: " + ec.message();
    };
    updates_then(0, 0, 1'000);
    updates_then(32, 1'000, 1'000);  // as many as are allowed: the data goes through
    updates_then(33, 2'000, 1'000);  // one more: the gateway ends the connection
    std::error_code ec;
    char byte;
    s.stream.read_some(asio::buffer(&byte, 1), ec);  // until the gateway closes
  });
  BOOST_TEST_REQUIRE(t.channel->own_records());
  BOOST_TEST(read_pattern(*t.channel, t.socket, 2'000) == 0u);
  const std::error_code end = read_end(*t.channel, t.socket);
  BOOST_TEST(static_cast<bool>(end));
  BOOST_TEST((end != asio::error::eof), end.message());
  BOOST_TEST_MESSAGE("the 33rd key update in a row: " << end.message());
  t.socket.close();
  const std::string peer_error = t.joined_peer_error();
  BOOST_TEST(peer_error.empty(), peer_error);
}
