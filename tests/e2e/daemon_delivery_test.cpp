// The real daemon end to end: routing, per-supplier order, protocol-error isolation, SIGTERM
// drain, lossless backpressure, and byte-for-byte delivery by the consumers' strand drains.
#include <boost/test/unit_test.hpp>

#include <csignal>
#include <map>
#include <set>
#include <thread>

#include "protocol/frame_codec.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"
#include "tools/traffic/payload.hpp"

using namespace gatewayd::test;
using gatewayd::traffic::numbered_payload;
using namespace std::chrono_literals;

namespace {

// The frames of sender `s` in the order they arrived ("address|payload").
std::vector<std::string> of_supplier(const test_consumer& c, std::uint16_t s) {
  std::vector<std::string> out;
  for (const auto& f : c.frames()) {
    const auto h = gatewayd::traffic::read_header(f.payload);
    if (h && h->sender == s) {
      std::string x = f.address;
      x += '|';
      x += f.payload;
      out.push_back(std::move(x));
    }
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(routes_every_frame_in_per_supplier_order) {
  test_consumer a, b;
  gateway_fixture gw(consumer_toml("a", a.endpoint()) + consumer_toml("b", b.endpoint()) +
                     route_toml("a.>", {"a"}) + route_toml("b.>", {"b"}) +
                     route_toml("both.x", {"a", "b"}));
  BOOST_TEST(gw.daemon->count_in_log("(2 threads, leader-followers)") == 1u, gw.daemon->log());
  BOOST_TEST_REQUIRE(a.wait_for_connections(1, 5s));
  BOOST_TEST_REQUIRE(b.wait_for_connections(1, 5s));

  constexpr int suppliers = 3;
  constexpr int frames = 3000;
  const std::vector<std::string> addresses = {"a.1", "b.2", "both.x", "nowhere", "a.x.y"};
  std::map<std::string, std::vector<std::vector<std::string>>> expect;
  expect["a"].resize(suppliers + 1);
  expect["b"].resize(suppliers + 1);
  std::vector<std::unique_ptr<test_supplier>> senders;
  for (int s = 1; s <= suppliers; ++s) {
    senders.push_back(std::make_unique<test_supplier>(gw.supplier_port));
    for (int seq = 0; seq < frames; ++seq) {
      const auto& addr = addresses[static_cast<std::size_t>(seq + s) % addresses.size()];
      const auto p = numbered_payload(s, seq, 1 + static_cast<std::size_t>(seq * 7 % 300));
      const std::string line = addr + "|" + p;
      if (addr[0] == 'a' || addr == "both.x") expect["a"][s].push_back(line);
      if (addr[0] == 'b') expect["b"][s].push_back(line);
    }
  }
  // All suppliers at once, so that several threads route and enqueue concurrently.
  std::vector<std::thread> threads;
  for (int s = 1; s <= suppliers; ++s) {
    threads.emplace_back([&, s] {
      std::string batch;
      for (int seq = 0; seq < frames; ++seq) {
        const auto& addr = addresses[static_cast<std::size_t>(seq + s) % addresses.size()];
        batch += gatewayd::protocol::encode_frame(
            addr, numbered_payload(s, seq, 1 + static_cast<std::size_t>(seq * 7 % 300)));
        if (seq % 97 == 0) {
          senders[static_cast<std::size_t>(s - 1)]->send(batch);
          batch.clear();
        }
      }
      senders[static_cast<std::size_t>(s - 1)]->send(batch);
    });
  }
  for (auto& t : threads)
    t.join();
  // Nothing extra follows: each supplier ends with a marker to both consumers. A supplier's
  // frames reach a consumer in order, so once all its markers are in, anything extra is among
  // what arrived.
  const std::string marker = "marker";
  for (auto& s : senders)
    s->send_frame("both.x", marker);

  for (auto [name, c] : {std::pair{"a", &a}, std::pair{"b", &b}}) {
    std::size_t total = 0;
    for (const auto& e : expect[name])
      total += e.size();
    BOOST_TEST_REQUIRE(c->wait_for_payload(marker, std::size_t{suppliers}, 20s),
                       name << " got " << c->count());
    BOOST_TEST(c->count_payload(marker) == std::size_t{suppliers}, name);
    BOOST_TEST(c->count() == total + suppliers, name);
    BOOST_TEST(c->corruptions() == 0u);
    for (int s = 1; s <= suppliers; ++s)
      BOOST_TEST((of_supplier(*c, s) == expect[name][s]), name << " supplier " << s);
  }
}

BOOST_AUTO_TEST_CASE(a_protocol_error_closes_only_that_supplier) {
  test_consumer c;
  gateway_fixture gw(consumer_toml("c", c.endpoint()) + route_toml("t.>", {"c"}));
  BOOST_TEST_REQUIRE(c.wait_for_connections(1, 5s));
  test_supplier good(gw.supplier_port), bad(gw.supplier_port);
  std::thread sender([&] {
    for (int i = 0; i < 2000; ++i)
      good.send_frame("t.good", numbered_payload(1, i));
  });
  bad.send(gatewayd::protocol::encode_frame("t.bad", numbered_payload(2, 0)) +
           gatewayd::protocol::encode_frame("t.bad", numbered_payload(2, 1)) + "XXXXgarbage");
  BOOST_TEST(bad.closed_by_peer(10s));
  sender.join();
  BOOST_TEST_REQUIRE(c.wait_for_count(2002, 10s), "got " << c.count());
  const auto from_good = of_supplier(c, 1);
  BOOST_TEST_REQUIRE(from_good.size() == 2000u);
  for (int i = 0; i < 2000; ++i)
    BOOST_TEST(from_good[static_cast<std::size_t>(i)] == "t.good|" + numbered_payload(1, i));
  BOOST_TEST((of_supplier(c, 2) == std::vector<std::string>{"t.bad|" + numbered_payload(2, 0),
                                                            "t.bad|" + numbered_payload(2, 1)}));
  BOOST_TEST(gw.daemon->wait_for_log("protocol error bad_magic at byte offset", 5s).has_value());
  // The gateway still takes new suppliers.
  test_supplier later(gw.supplier_port);
  later.send_frame("t.later", numbered_payload(3, 0));
  BOOST_TEST(c.wait_for_count(2003, 5s));
}

BOOST_AUTO_TEST_CASE(sigterm_drains_every_queued_frame) {
  test_consumer c;
  c.stall(true);
  gateway_fixture gw(
      consumer_toml("c", c.endpoint(), "queue_capacity = 100000") + route_toml("d.>", {"c"}),
      "drain_timeout_ms = 15000\n");
  BOOST_TEST_REQUIRE(c.wait_for_connections(1, 5s));
  test_supplier s(gw.supplier_port);
  constexpr int frames = 4000;
  for (int i = 0; i < frames; ++i)
    s.send_frame("d.x", numbered_payload(1, i, 1000));
  // Everything read (so it sits in the gateway's queue or the kernel's buffers) before SIGTERM.
  BOOST_TEST_REQUIRE(eventually(
      [&] {
        return scrape_metric(gw.metrics_port, "gatewayd_supplier_messages_received_total") ==
               frames;
      },
      10s));
  gw.daemon->signal(SIGTERM);
  BOOST_TEST_REQUIRE(gw.daemon->wait_for_log("shutting down", 5s).has_value());
  c.stall(false);
  const auto code = gw.daemon->wait_exit(20s);
  BOOST_TEST_REQUIRE(code.has_value());
  BOOST_TEST(*code == 0);
  BOOST_TEST_REQUIRE(c.wait_for_count(frames, 5s));
  const auto got = of_supplier(c, 1);
  BOOST_TEST_REQUIRE(got.size() == static_cast<std::size_t>(frames));
  for (int i = 0; i < frames; ++i)
    BOOST_TEST(got[static_cast<std::size_t>(i)] == "d.x|" + numbered_payload(1, i, 1000));
  BOOST_TEST(c.corruptions() == 0u);
  BOOST_TEST(gw.daemon->count_in_log("drain finished: 0 frames undelivered") == 1u,
             gw.daemon->log());
}

BOOST_AUTO_TEST_CASE(backpressure_pauses_and_resumes_without_loss) {
  test_consumer c;
  c.stall(true);
  gateway_fixture gw(
      consumer_toml("c", c.endpoint(), "queue_capacity = 100\noverflow = \"backpressure\"") +
      route_toml("bp.>", {"c"}));
  BOOST_TEST_REQUIRE(c.wait_for_connections(1, 5s));
  constexpr int frames = 20000;
  std::thread sender([&] {
    test_supplier s(gw.supplier_port);
    for (int i = 0; i < frames; ++i)
      s.send_frame("bp.x", numbered_payload(1, i, 2000));
  });
  // The supplier is held by backpressure (and then TCP) before the consumer reads again.
  BOOST_TEST_REQUIRE(eventually(
      [&] {
        return scrape_metric(gw.metrics_port, "gatewayd_supplier_backpressure_pauses_total") >= 1;
      },
      10s));
  c.stall(false);
  sender.join();
  BOOST_TEST_REQUIRE(c.wait_for_count(frames, 60s), "got " << c.count());
  const auto got = of_supplier(c, 1);
  BOOST_TEST_REQUIRE(got.size() == static_cast<std::size_t>(frames));
  bool in_order = true;
  for (int i = 0; i < frames; ++i)
    in_order &= got[static_cast<std::size_t>(i)] == "bp.x|" + numbered_payload(1, i, 2000);
  BOOST_TEST(in_order);
  BOOST_TEST(c.corruptions() == 0u);
}

BOOST_AUTO_TEST_CASE(the_strand_drains_deliver_byte_for_byte_in_order) {
  test_consumer one, two;
  gateway_fixture gw(consumer_toml("one", one.endpoint()) + consumer_toml("two", two.endpoint()) +
                     route_toml("f.>", {"one", "two"}) + route_toml("o.>", {"one"}));
  BOOST_TEST_REQUIRE(one.wait_for_connections(1, 5s));
  BOOST_TEST_REQUIRE(two.wait_for_connections(1, 5s));
  constexpr int frames = 4000;
  test_supplier s1(gw.supplier_port), s2(gw.supplier_port);
  std::vector<std::string> sent1, sent2;
  std::thread t([&] {
    for (int i = 0; i < frames; ++i) {
      const auto p = numbered_payload(1, i, static_cast<std::size_t>(1 + i * 13 % 3000));
      s1.send_frame("f.x", p);
      sent1.push_back("f.x|" + p);
    }
  });
  for (int i = 0; i < frames; ++i) {
    const auto p = numbered_payload(2, i, static_cast<std::size_t>(1 + i * 31 % 5000));
    const std::string addr = i % 2 ? "f.y" : "o.y";
    s2.send_frame(addr, p);
    sent2.push_back(addr + "|" + p);
  }
  t.join();
  std::vector<std::string> sent2_two;
  for (const auto& x : sent2)
    if (x[0] == 'f') sent2_two.push_back(x);
  // Nothing extra follows: each supplier ends with a marker to both consumers, behind its
  // frames on its connection.
  const std::string marker = "marker";
  s1.send_frame("f.end", marker);
  s2.send_frame("f.end", marker);
  BOOST_TEST_REQUIRE(one.wait_for_payload(marker, 2, 20s), "one got " << one.count());
  BOOST_TEST_REQUIRE(two.wait_for_payload(marker, 2, 20s), "two got " << two.count());
  BOOST_TEST(one.count() == 2u * frames + 2);
  BOOST_TEST(two.count() == frames + sent2_two.size() + 2);
  BOOST_TEST(one.corruptions() == 0u);
  BOOST_TEST(two.corruptions() == 0u);
  BOOST_TEST((of_supplier(one, 1) == sent1));
  BOOST_TEST((of_supplier(one, 2) == sent2));
  BOOST_TEST((of_supplier(two, 1) == sent1));
  BOOST_TEST((of_supplier(two, 2) == sent2_two));

  BOOST_TEST_REQUIRE(gw.metrics_port != 0);
  const auto series = [](const std::string& cause) {
    return "gatewayd_consumer_blocked_seconds_total{consumer=\"one\",cause=\"" + cause + "\"}";
  };
  BOOST_TEST(
      scrape_metric(gw.metrics_port, "gatewayd_consumer_messages_sent_total{consumer=\"one\"}") ==
      2.0 * frames + 2);
  // Contended queue-lock time is all a consumer can cost a thread: nothing writes blocking.
  BOOST_TEST(scrape_metric(gw.metrics_port, series("lock")) >= 0.0);
  BOOST_TEST(scrape_metric(gw.metrics_port, series("write")) == -1.0);  // no such series
}
