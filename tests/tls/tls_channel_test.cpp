// tls_channel against OpenSSL at the other end of a loopback connection: every byte gets
// through whatever the reader's buffer size, over every suite gatewayd offers, TLS 1.3 and 1.2;
// key updates work both ways; a write that would block goes on with the same bytes; close_notify
// is understood both ways; kernel TLS falls back to OpenSSL's records where the host has none.
// Hostile peers (OpenSSL's handshake, then records it would never send) meet OpenSSL's limits.
// Certificates from the openssl CLI, made at run time.
#include <boost/test/unit_test.hpp>

#include <openssl/ssl.h>
#include <poll.h>

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <atomic>
#include <chrono>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "net/tls_channel.hpp"
#include "net/tls_context.hpp"
#include "tests/support/raw_tls_client.hpp"
#include "tests/support/tls_peers.hpp"
#include "tests/support/wait_until.hpp"

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

// Waits until the socket is ready for what the channel's last would_block wants; fails the test
// after 10 s (a test never hangs).
void wait_ready(asio::ip::tcp::socket& socket, const net::tls_channel& channel) {
  const short events = channel.wait_for() == asio::socket_base::wait_write ? POLLOUT : POLLIN;
  pollfd p{socket.native_handle(), events, 0};
  BOOST_TEST_REQUIRE(::poll(&p, 1, 10'000) == 1, "not ready for 10 s");
}

// close_notify is best effort: on a full socket it is dropped, and a peer that waits for it
// (OpenSSL's shutdown, a read to the end) would wait for ever. The tests send it once the peer
// has made room for it.
void close_notify_when_room(net::tls_channel& channel, asio::ip::tcp::socket& socket) {
  pollfd room{socket.native_handle(), POLLOUT, 0};
  BOOST_TEST(::poll(&room, 1, 10'000) == 1, "the peer took nothing for 10 s");
  channel.close_notify();
}

std::shared_ptr<net::tls_channel> handshaken(asio::io_context& ioc, asio::ip::tcp::socket& socket,
                                             SSL_CTX* ctx, net::tls_channel::side side,
                                             const std::string& server_name = "",
                                             bool kernel_tls = false) {
  std::error_code ec;
  auto channel = net::tls_channel::make(socket, ctx, side, kernel_tls, ec);
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
      wait_ready(socket, channel);
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
  for (int reads = 0; reads < 10'000; ++reads) {
    std::error_code ec;
    const std::size_t n = channel.read_some(asio::buffer(&byte, 1), ec);
    if (ec != asio::error::would_block) return n ? std::error_code{} : ec;
    wait_ready(socket, channel);
  }
  return asio::error::timed_out;
}

// Writes `data` as frames of 1 to 3,000 bytes (a consumer's batch: pieces lying apart), waiting
// whenever the channel would block and then offering the pieces not yet written, as the
// consumer's writer does.
void write_frames(net::tls_channel& channel, asio::ip::tcp::socket& socket, std::string_view data,
                  std::mt19937& rng, std::size_t* would_blocks = nullptr) {
  std::vector<iovec> pieces;
  for (std::size_t at = 0, n = 0; at < data.size(); at += n) {
    n = std::min<std::size_t>(data.size() - at, 1 + rng() % 3'000);
    pieces.push_back({const_cast<char*>(data.data() + at), n});
  }
  std::size_t first = 0;
  while (first < pieces.size()) {
    std::error_code ec;
    std::size_t n = channel.write_some(std::span(pieces).subspan(first), ec);
    // What was written: whole pieces, then the written part of the next one.
    while (first < pieces.size() && pieces[first].iov_len <= n)
      n -= pieces[first++].iov_len;
    if (first < pieces.size()) {
      pieces[first].iov_base = static_cast<char*>(pieces[first].iov_base) + n;
      pieces[first].iov_len -= n;
    }
    if (ec == asio::error::would_block) {
      if (would_blocks) ++*would_blocks;
      wait_ready(socket, channel);
      continue;
    }
    BOOST_TEST_REQUIRE(!ec, ec.message());
  }
}

net::tls_server_context server_context(const test::pki& p) {
  auto c =
      net::make_tls_server_context({p.at("gateway.crt"), p.at("gateway.key"), p.at("ca.crt"), {}});
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
  std::atomic<bool> peer_done{false};
  std::shared_ptr<net::tls_channel> channel;

  // `before(ssl)` configures the client; `client(s)` runs once it has connected; meanwhile we
  // accept and handshake.
  template <class Before, class Client>
  void start(Before before, Client client, bool kernel_tls = false) {
    peer = std::thread([this, port = acceptor.local_endpoint().port(), before, client] {
      struct done_on_exit {
        std::atomic<bool>& done;
        ~done_on_exit() { done = true; }
      } mark{peer_done};
      test::tls_supplier s(p, "orders");
      before(s.stream.native_handle());
      if (const auto ec = s.connect(port)) {
        peer_error = "connect: " + ec.message();
        return;
      }
      client(s);
    });
    acceptor.accept(socket);
    channel = handshaken(ioc, socket, server.context->native_handle(),
                         net::tls_channel::side::server, "", kernel_tls);
  }

  // The gateway's side of a raw hostile client: accepts and handshakes while `client`
  // connects on this thread's behalf (its handshake is blocking, so it runs on a thread).
  void accept_raw(test::raw_tls_client& client) {
    auto connected = std::async(std::launch::async,
                                [&] { return client.connect(acceptor.local_endpoint().port()); });
    acceptor.accept(socket);
    channel =
        handshaken(ioc, socket, server.context->native_handle(), net::tls_channel::side::server);
    BOOST_TEST_REQUIRE(connected.get(), client.why());
  }

  // The client's verdict, once it is done; a client still at it after 20 s is cut off (the
  // connection closed under it) and the test fails rather than hangs.
  std::string joined_peer_error() {
    const bool finished = test::wait_until([this] { return peer_done.load(); }, 20s);
    if (!finished) socket.close();
    peer.join();
    return finished ? peer_error : "the client was still running after 20 s; " + peer_error;
  }

  ~server_side() {
    socket.close();  // a client still reading gives up
    if (peer.joinable()) peer.join();
  }
};

void no_setup(SSL*) {}

// The error that ends a read on a channel whose peer misbehaves, or none after 10,000 reads.
std::error_code read_until_failure(net::tls_channel& channel, asio::ip::tcp::socket& socket) {
  std::vector<char> buffer(65'536);
  for (int reads = 0; reads < 10'000; ++reads) {
    std::error_code ec;
    channel.read_some(asio::buffer(buffer), ec);
    if (ec == asio::error::would_block) {
      wait_ready(socket, channel);
      continue;
    }
    if (ec) return ec;
  }
  return {};
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_tls13_client_streams_through_and_key_updates_go_both_ways) {
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
  BOOST_TEST((t.channel->records() == net::tls_records::openssl));
  BOOST_TEST(read_pattern(*t.channel, t.socket, total) == 0u);
  close_notify_when_room(*t.channel, t.socket);
  const std::error_code end = read_end(*t.channel, t.socket);
  const std::string peer_error = t.joined_peer_error();
  BOOST_TEST(peer_error.empty(), peer_error);
  BOOST_TEST((end == asio::error::eof), end.message());
}

BOOST_AUTO_TEST_CASE(a_tls13_server_with_tickets_reads_our_batches_across_its_key_update) {
  test::pki p;
  const auto client = net::make_tls_client_context(
      {p.at("ca.crt"), "gateway.test", p.at("orders.crt"), p.at("orders.key"), {}});
  BOOST_TEST_REQUIRE(client.error.empty(), client.error);
  constexpr std::size_t total = 3'000'000;
  const std::string data = pattern_run(0, total);

  // OpenSSL's server as it comes: two session tickets after the handshake. It starts reading
  // only after a pause, so that our writes meet a full socket and go on after would_block.
  std::promise<unsigned short> listening;
  std::string peer_error;
  std::size_t peer_wrong = 0;
  std::thread peer([&] {
    asio::io_context pio;
    asio::ssl::context ctx(asio::ssl::context::tls_server);
    ctx.use_certificate_chain_file(p.at("gateway.crt").string());
    ctx.use_private_key_file(p.at("gateway.key").string(), asio::ssl::context::pem);
    asio::ip::tcp::acceptor acceptor(pio, {asio::ip::make_address("127.0.0.1"), 0});
    // Small buffers on both ends (the accepted socket inherits the listener's): the writes
    // below meet a full socket long before the peer reads.
    acceptor.set_option(asio::socket_base::receive_buffer_size(8192));
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
    std::this_thread::sleep_for(200ms);  // the shape under test: a reader that lags
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
  socket.open(asio::ip::tcp::v4());
  socket.set_option(asio::socket_base::send_buffer_size(16384));
  socket.connect({asio::ip::make_address("127.0.0.1"), listening.get_future().get()});
  auto channel = handshaken(ioc, socket, client.context->native_handle(),
                            net::tls_channel::side::client, "gateway.test");

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

  std::mt19937 rng(11);
  std::size_t would_blocks = 0;
  write_frames(*channel, socket, std::string_view(data).substr(0, total / 2), rng, &would_blocks);
  BOOST_TEST(would_blocks > 0u, "the socket never filled: the retry path did not run");
  run_until(ioc, [&] { return heard == "go" || read_end; });
  BOOST_TEST_REQUIRE(heard == "go", "heard \"" << heard << "\", " << read_end.message());
  write_frames(*channel, socket, std::string_view(data).substr(total / 2), rng);
  channel->release_buffers();
  close_notify_when_room(*channel, socket);  // the lagging peer: this test hung once without
  run_until(ioc, [&] { return static_cast<bool>(read_end); });
  // Should the peer still wait, it is told by the connection's end: a failure, never a hang.
  if (!read_end) socket.close();
  peer.join();
  BOOST_TEST(peer_error.empty(), peer_error);
  BOOST_TEST(peer_wrong == 0u);
  BOOST_TEST((read_end == asio::error::eof), read_end.message());
}

// Every suite gatewayd's contexts offer, with OpenSSL's client restricted to it: bytes both
// ways, and the suite is the one asked for.
BOOST_AUTO_TEST_CASE(every_suite_carries_bytes_both_ways) {
  struct suite {
    const char* name;   // OpenSSL's name, as SSL_get_cipher reports it
    const char* tls13;  // a TLS 1.3 suite, or null
    const char* tls12;  // a TLS 1.2 cipher list, or null
  };
  const suite suites[] = {
      {"TLS_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256", nullptr},
      {"TLS_AES_256_GCM_SHA384", "TLS_AES_256_GCM_SHA384", nullptr},
      {"TLS_CHACHA20_POLY1305_SHA256", "TLS_CHACHA20_POLY1305_SHA256", nullptr},
      {"ECDHE-ECDSA-AES128-GCM-SHA256", nullptr, "ECDHE-ECDSA-AES128-GCM-SHA256"},
      {"ECDHE-ECDSA-AES256-GCM-SHA384", nullptr, "ECDHE-ECDSA-AES256-GCM-SHA384"},
      {"ECDHE-ECDSA-CHACHA20-POLY1305", nullptr, "ECDHE-ECDSA-CHACHA20-POLY1305"},
  };
  for (const suite& s : suites) {
    BOOST_TEST_CONTEXT(s.name) {
      constexpr std::size_t up = 200'000, down = 150'000;
      server_side t;
      t.start(
          [&s](SSL* ssl) {
            if (s.tls13) {
              SSL_set_min_proto_version(ssl, TLS1_3_VERSION);
              SSL_set_ciphersuites(ssl, s.tls13);
            } else {
              SSL_set_max_proto_version(ssl, TLS1_2_VERSION);
              SSL_set_cipher_list(ssl, s.tls12);
            }
          },
          [&t](test::tls_supplier& c) {
            if (const auto ec = c.send(pattern_run(0, up))) {
              t.peer_error = "send: " + ec.message();
              return;
            }
            std::string got(down, '\0');
            std::error_code ec;
            asio::read(c.stream, asio::buffer(got), ec);
            if (ec) t.peer_error = "read: " + ec.message();
            if (got != pattern_run(up, down)) t.peer_error = "read the wrong bytes";
            c.stream.shutdown(ec);
          });
      BOOST_TEST(std::string(SSL_get_cipher(t.channel->native_handle())) == s.name);
      BOOST_TEST(read_pattern(*t.channel, t.socket, up) == 0u);
      std::mt19937 rng(3);
      write_frames(*t.channel, t.socket, pattern_run(up, down), rng);
      const std::error_code end = read_end(*t.channel, t.socket);
      close_notify_when_room(*t.channel, t.socket);
      const std::string peer_error = t.joined_peer_error();
      BOOST_TEST(peer_error.empty(), peer_error);
      BOOST_TEST((end == asio::error::eof), end.message());
    }
  }
}

// This host's kernel may lack the TLS module (then OpenSSL keeps the records: the fallback), or
// have it (then it seals what we send). Either way the bytes get through.
BOOST_AUTO_TEST_CASE(kernel_tls_is_used_where_the_host_has_it_and_falls_back_where_not) {
  constexpr std::size_t total = 100'000;
  server_side t;
  t.start(
      no_setup,
      [&t](test::tls_supplier& s) {
        std::string got(total, '\0');
        std::error_code ec;
        asio::read(s.stream, asio::buffer(got), ec);
        if (ec || got != pattern_run(0, total)) t.peer_error = "read: " + ec.message();
        s.stream.shutdown(ec);
      },
      true);
  const bool loaded = net::kernel_tls_loaded();
  BOOST_TEST_MESSAGE(
      "kernel TLS loaded: " << loaded << "; records: " << net::to_string(t.channel->records()));
  if (loaded) {
    BOOST_TEST((t.channel->records() != net::tls_records::openssl));
  } else {
    BOOST_TEST((t.channel->records() == net::tls_records::openssl));
  }
  std::mt19937 rng(5);
  write_frames(*t.channel, t.socket, pattern_run(0, total), rng);
  close_notify_when_room(*t.channel, t.socket);
  const std::string peer_error = t.joined_peer_error();
  BOOST_TEST(peer_error.empty(), peer_error);
}

// OpenSSL's limits against a peer that handshook and then streams records that carry no data:
// 32 empty records in a row are taken (and the data after them read), the 33rd ends it.
BOOST_AUTO_TEST_CASE(thirty_three_empty_records_in_a_row_end_the_connection) {
  server_side t;
  test::raw_tls_client hostile(t.p, "orders");
  t.accept_raw(hostile);
  BOOST_TEST_REQUIRE(hostile.forger().ready());
  auto& forge = hostile.forger();
  const auto empties = [&](int n) {
    std::string records;
    for (int i = 0; i < n; ++i)
      records += forge.seal(test::tls_record_forger::application_data, "");
    return records;
  };
  // Sealed in the order they go out (an operand of + may be evaluated first).
  std::string records = empties(32);
  records += forge.seal(test::tls_record_forger::application_data, pattern_run(0, 100));
  BOOST_TEST_REQUIRE(hostile.send_raw(records));
  BOOST_TEST(read_pattern(*t.channel, t.socket, 100) == 0u);
  BOOST_TEST_REQUIRE(hostile.send_raw(empties(33)));
  const std::error_code end = read_until_failure(*t.channel, t.socket);
  BOOST_TEST_REQUIRE(static_cast<bool>(end), "33 empty records did not end the connection");
  BOOST_TEST((net::classify_tls_error(end) == net::tls_error::unexpected_message), end.message());
}

BOOST_AUTO_TEST_CASE(five_warning_alerts_in_a_row_end_the_connection) {
  server_side t;
  test::raw_tls_client hostile(t.p, "orders");
  t.accept_raw(hostile);
  BOOST_TEST_REQUIRE(hostile.forger().ready());
  auto& forge = hostile.forger();
  const std::string user_canceled{1, 90};  // warning, user_canceled: TLS 1.3's only warning
  const auto alerts = [&](int n) {
    std::string records;
    for (int i = 0; i < n; ++i)
      records += forge.seal(test::tls_record_forger::alert, user_canceled);
    return records;
  };
  std::string records = alerts(4);
  records += forge.seal(test::tls_record_forger::application_data, pattern_run(0, 100));
  BOOST_TEST_REQUIRE(hostile.send_raw(records));
  BOOST_TEST(read_pattern(*t.channel, t.socket, 100) == 0u);
  BOOST_TEST_REQUIRE(hostile.send_raw(alerts(5)));
  const std::error_code end = read_until_failure(*t.channel, t.socket);
  BOOST_TEST_REQUIRE(static_cast<bool>(end), "5 warning alerts did not end the connection");
  BOOST_TEST((net::classify_tls_error(end) == net::tls_error::unexpected_message), end.message());
}

BOOST_AUTO_TEST_CASE(a_record_that_fails_its_tag_is_fatal_and_classified) {
  server_side t;
  test::raw_tls_client hostile(t.p, "orders");
  t.accept_raw(hostile);
  BOOST_TEST_REQUIRE(hostile.forger().ready());
  std::string record =
      hostile.forger().seal(test::tls_record_forger::application_data, pattern_run(0, 64));
  record[20] ^= 1;  // one bit of the ciphertext
  BOOST_TEST_REQUIRE(hostile.send_raw(record));
  const std::error_code end = read_until_failure(*t.channel, t.socket);
  BOOST_TEST_REQUIRE(static_cast<bool>(end));
  BOOST_TEST((net::classify_tls_error(end) == net::tls_error::bad_record_mac), end.message());
  // A channel that failed sends nothing more (no close_notify after OpenSSL's fatal alert).
  t.channel->close_notify();
  std::error_code again;
  char byte;
  t.channel->read_some(asio::buffer(&byte, 1), again);
  BOOST_TEST((again == asio::error::not_connected), again.message());
}

// A peer that asks for key updates and never reads: each answer is OpenSSL's to send, and once
// the socket is full OpenSSL holds one record and the read waits for room (the owner bounds how
// long: the supplier session closes it as slow_peer).
BOOST_AUTO_TEST_CASE(a_key_update_requester_that_never_reads_makes_reads_wait_for_room) {
  server_side t;
  test::raw_tls_client hostile(t.p, "orders");
  hostile.small_receive_buffer();
  t.accept_raw(hostile);
  // Our send buffer small too, so that it fills after a few thousand answers.
  t.socket.set_option(asio::socket_base::send_buffer_size(4096));
  std::vector<char> buffer(4096);
  int requests = 0;
  bool waiting_for_room = false;
  while (!waiting_for_room && requests < 200'000) {
    for (int i = 0; i < 100; ++i, ++requests)
      BOOST_TEST_REQUIRE(hostile.request_key_update(), "after " << requests << " requests");
    for (;;) {
      std::error_code ec;
      t.channel->read_some(asio::buffer(buffer), ec);
      if (ec == asio::error::would_block) {
        waiting_for_room = t.channel->wait_for() == asio::socket_base::wait_write;
        break;
      }
      BOOST_TEST_REQUIRE(!ec, ec.message());
    }
  }
  BOOST_TEST_MESSAGE("reads wait for room after " << requests << " key update requests");
  BOOST_TEST(waiting_for_room);
}

// A file OpenSSL cannot open is named with the reason the system gave, not an error number.
BOOST_AUTO_TEST_CASE(a_missing_certificate_file_is_told_in_words) {
  test::pki p;
  const auto built =
      net::make_tls_server_context({p.at("missing.crt"), p.at("gateway.key"), {}, {}});
  BOOST_TEST(!built.context);
  BOOST_TEST(built.error.find("No such file or directory") != std::string::npos, built.error);
}
