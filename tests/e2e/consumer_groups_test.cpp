// Consumer groups (issue 32) against the real daemon on loopback: a consumer with
// `endpoints = [...]` sends each frame to one live member (round-robin, address), and a member
// that dies, is down from the start, or is removed by a reload hands what it held to the others.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "protocol/frame_codec.hpp"
#include "tests/support/consumer_groups.hpp"
#include "tests/support/daemon_process.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/peer_tool.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"
#include "tools/traffic/payload.hpp"

using namespace gatewayd;
using namespace gatewayd::test;
using namespace std::chrono_literals;

namespace {

// A payload that names its sequence, readable both from a test_consumer and `recv --print`.
std::string payload(std::uint64_t seq, std::size_t size = traffic::header_size) {
  char tail[32];
  std::snprintf(tail, sizeof tail, "seq=%08llu;", static_cast<unsigned long long>(seq));
  return traffic::numbered_payload(0, seq, size) + tail;
}

std::uint64_t seq_of(const std::string& payload) {
  const auto at = payload.rfind("seq=");
  return at == std::string::npos ? ~0ull : std::stoull(payload.substr(at + 4, 8));
}

// Every "seq=NNNNNNNN;" that `recv --print` showed in `log`, in order of arrival.
std::vector<std::uint64_t> printed(const std::string& log) {
  std::vector<std::uint64_t> seqs;
  for (auto at = log.find("seq="); at != std::string::npos; at = log.find("seq=", at + 4)) {
    if (at + 13 > log.size() || log[at + 12] != ';') continue;
    const std::string digits = log.substr(at + 4, 8);
    if (digits.find_first_not_of("0123456789") != std::string::npos) continue;
    seqs.push_back(std::stoull(digits));
  }
  return seqs;
}

std::string frames(const std::string& address, std::uint64_t from, std::uint64_t to,
                   std::size_t size = traffic::header_size) {
  std::string out;
  for (std::uint64_t i = from; i < to; ++i)
    protocol::append_frame(out, address, payload(i, size));
  return out;
}

// Large frames whose sequence `recv --print` still shows (it previews 64 bytes): the
// sequence right after the header, then padding.
std::string padded_frames(const std::string& address, std::uint64_t from, std::uint64_t to,
                          std::size_t size) {
  std::string out;
  for (std::uint64_t i = from; i < to; ++i) {
    std::string p = payload(i);
    p.resize(std::max(size, p.size()), '.');
    protocol::append_frame(out, address, p);
  }
  return out;
}

void replace_file(const std::filesystem::path& file, const std::string& content) {
  auto tmp = file;
  tmp += ".tmp";
  std::ofstream(tmp, std::ios::binary | std::ios::trunc) << content;
  std::filesystem::rename(tmp, file);
}

// Every sequence the consumers got, once each, and how many came twice or more.
struct union_of {
  std::set<std::uint64_t> seen;
  std::size_t total = 0;
  void add(const std::vector<received_frame>& got) {
    for (const auto& f : got) {
      seen.insert(seq_of(f.payload));
      ++total;
    }
  }
  std::size_t duplicates() const { return total - seen.size(); }
};

// The member a case SIGKILLs: it acknowledges and prints what it reads, then stops reading
// 0.2 s after its first frame, holding what is written to it unacknowledged.
peer_receiver stalling_ack_member(const temp_dir& peers) {
  return peer_receiver(peers, "killed",
                       {"--ack", "--print", "--stall-after", "0.2", "--one-consumer"});
}

}  // namespace

// (1) Three members, round-robin, 300,000 frames: each member gets a third (within 10 %), none
// is lost, none comes twice. Before: `endpoints` was an unknown key and the daemon refused it.
BOOST_AUTO_TEST_CASE(round_robin_spreads_evenly_over_three_members) {
  test_consumer a, b, c;
  const std::vector<std::string> members{a.endpoint(), b.endpoint(), c.endpoint()};
  gateway_fixture gw(
      group_toml("billing", members, "queue_capacity = 400000") + route_toml("t.>", {"billing"}),
      "slow_consumer_ms = 60000");
  BOOST_TEST_REQUIRE(members_connected(gw, "billing", members));
  constexpr std::uint64_t total = 300000;
  test_supplier s(gw.supplier_port);
  // Paced, 3,000 frames at a time, each lot read before the next: a member more than its pause
  // mark (4,096 frames) behind has no room, and round-robin gives its turns to the others by
  // design, which a reader slowed by a loaded machine showed as an uneven spread (CI: 10,001
  // over the 10 %). The spread is what this case checks (the skip is member_choice.cpp's rule).
  constexpr std::uint64_t lot = 3000;
  for (std::uint64_t i = 0; i < total; i += lot) {
    s.send(frames("t.a", i, i + lot));
    BOOST_TEST_REQUIRE(
        eventually([&] { return a.count() + b.count() + c.count() >= i + lot; }, 30s),
        a.count() << " " << b.count() << " " << c.count());
  }
  union_of all;
  for (auto* m : {&a, &b, &c}) {
    BOOST_TEST_INFO(m->endpoint());
    BOOST_TEST(std::abs(static_cast<double>(m->count()) - total / 3.0) <= total / 30.0);
    BOOST_TEST(m->corruptions() == 0u);
    all.add(m->frames());
  }
  BOOST_TEST(all.seen.size() == total);
  BOOST_TEST(all.duplicates() == 0u);
  BOOST_TEST(scrape_metric(gw.metrics_port, member_series("gatewayd_consumer_messages_sent_total",
                                                          "billing", a.endpoint())) ==
             static_cast<double>(a.count()));
}

// A group of two fast members (test_consumer) and one reading `recv --rate 500`, routed `t.>`,
// with `extra` for the group; what the slow member was written and has queued, from /metrics.
struct one_slow_member {
  temp_dir peers;
  peer_receiver slow{peers, "slow", {"--rate", "500"}};
  test_consumer a, b;
  std::vector<std::string> members{a.endpoint(), b.endpoint(), slow.endpoint()};
  gateway_fixture gw;

  explicit one_slow_member(const std::string& extra)
      : gw(group_toml("billing", members, extra) + route_toml("t.>", {"billing"}),
           "slow_consumer_ms = 60000") {
    BOOST_TEST_REQUIRE(members_connected(gw, "billing", members));
  }
  double slow_sent() const {
    return scrape_metric(gw.metrics_port, member_series("gatewayd_consumer_messages_sent_total",
                                                        "billing", slow.endpoint()));
  }
  double slow_queued() const {
    return scrape_metric(gw.metrics_port, member_series("gatewayd_consumer_queue_depth", "billing",
                                                        slow.endpoint()));
  }
};

// (2) `least-queued` with one member reading slowly (`gateway-peer recv --rate 500`): it gets
// about what its rate takes, the two fast members the rest, and the group delivers everything
// at the fast members' pace. Round-robin would have queued a third (20,000 frames, 40 s at its
// rate) for the slow one.
BOOST_AUTO_TEST_CASE(least_queued_gives_a_slow_member_less) {
  one_slow_member g("balance = \"least-queued\"\nqueue_capacity = 100000");
  test_consumer &a = g.a, &b = g.b;
  constexpr std::uint64_t total = 60000;
  test_supplier s(g.gw.supplier_port);
  for (std::uint64_t i = 0; i < total; i += 5000)
    s.send(frames("t.a", i, i + 5000, 1024));
  // Everything has left the gateway: the fast members read theirs, the slow one's socket took
  // the rest.
  BOOST_TEST_REQUIRE(eventually(
      [&] { return a.count() + b.count() + g.slow_sent() >= total && g.slow_queued() == 0; }, 20s));
  const double to_slow = g.slow_sent();
  BOOST_TEST_MESSAGE("fast " << a.count() << " and " << b.count() << ", slow " << to_slow);
  BOOST_TEST(a.count() + b.count() + to_slow == total);
  // Round-robin gives each a third; least-queued gives the slow one what its rate and its
  // socket buffers take (in release about 1/12 of the total; under ASan up to 0.6 of what a
  // fast member gets).
  BOOST_TEST(to_slow <= 0.75 * static_cast<double>(std::min(a.count(), b.count())));
  BOOST_TEST(a.count() >= total / 3);
  BOOST_TEST(b.count() >= total / 3);
}

// (2, backpressure) A backpressure group pauses its suppliers only when the group as a whole
// cannot keep up: a member reading slowly (`recv --rate 500`) whose queue is at its limit is
// passed over while the others have room, and a supplier sending 20,000 frames/s is never
// paused. Before, the slow member's full queue paused the supplier until it drained to its
// low-water mark (0.75 s at its rate) each time it was given frames again: 43 pauses, the
// supplier held about 80 % of the time, and what it sent in 3 s placed on members after 6.
BOOST_AUTO_TEST_CASE(backpressure_pauses_only_when_the_whole_group_is_behind) {
  one_slow_member g("overflow = \"backpressure\"\nqueue_capacity = 500");
  test_consumer &a = g.a, &b = g.b;
  gateway_fixture& gw = g.gw;
  constexpr int rate = 20000, total = 60000;
  const auto t0 = std::chrono::steady_clock::now();
  daemon_process sender(peer_binary(),
                        {"send", "--to", "127.0.0.1:" + std::to_string(gw.supplier_port),
                         "--address", "t.a", "--size", "1024", "--rate", std::to_string(rate),
                         "--count", std::to_string(total), "--json"},
                        g.peers.path() / "send.log");
  // Everything is with a member: read by a fast one, or written or queued for the slow one.
  const auto placed = [&] { return a.count() + b.count() + g.slow_sent() + g.slow_queued(); };
  BOOST_TEST_REQUIRE(eventually([&] { return placed() >= total; }, 30s), placed());
  const auto took = std::chrono::steady_clock::now() - t0;
  BOOST_TEST_REQUIRE(sender.wait_exit(10s).value_or(-1) == 0, sender.log());
  const double pauses =
      scrape_metric(gw.metrics_port, "gatewayd_supplier_backpressure_pauses_total");
  BOOST_TEST_MESSAGE(
      "placed " << total << " in "
                << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                << " ms: fast members " << a.count() << " and " << b.count() << ", slow "
                << g.slow_sent() << " written and " << g.slow_queued()
                << " queued; supplier pauses " << pauses);
  // What tells the bug is the pauses (43 before): the time it took is the host's as much as the
  // gateway's (3 s at the sender's rate on a quiet host, 5.7 s beside three compilers; the slow
  // member alone would take 120), so it is reported above, not bounded.
  BOOST_TEST(pauses <= 5);
  BOOST_TEST(std::abs(static_cast<double>(a.count()) - static_cast<double>(b.count())) <=
             total / 20.0);  // the slow member's turns are shared, not all given to one
}

// (2, all loaded) A backpressure round-robin group whose every member reads at its own pace
// (`recv --rate 20000`, three of them) and is given more than that: each member falls behind
// for moments (congested), and a member behind still takes its turn (backpressure loses
// nothing), so the group delivers what its members can read. Before, a congested member was
// passed over while another kept up, each in turn, and the group delivered about 0.8 of it
// (bench group-kill: 0.55-0.60M of 0.75M frames/s after the kill).
BOOST_AUTO_TEST_CASE(a_loaded_backpressure_group_delivers_what_its_members_can_read) {
  temp_dir peers;
  std::vector<std::unique_ptr<peer_receiver>> rs;
  std::vector<std::string> members;
  for (const char* name : {"r1", "r2", "r3"}) {
    rs.push_back(
        std::make_unique<peer_receiver>(peers, name, std::vector<std::string>{"--rate", "20000"}));
    members.push_back(rs.back()->endpoint());
  }
  gateway_fixture gw(
      group_toml("billing", members, "overflow = \"backpressure\"\nqueue_capacity = 100000") +
          route_toml("t.>", {"billing"}),
      "");
  BOOST_TEST_REQUIRE(members_connected(gw, "billing", members));
  constexpr double total = 150000;
  daemon_process sender(peer_binary(),
                        {"send", "--to", "127.0.0.1:" + std::to_string(gw.supplier_port),
                         "--address", "t.a", "--size", "128", "--count", "150000"},
                        peers.path() / "send.log");
  const auto written = [&] {
    double n = 0;
    for (const auto& m : members)
      n += scrape_metric(gw.metrics_port,
                         member_series("gatewayd_consumer_messages_sent_total", "billing", m));
    return n;
  };
  BOOST_TEST_REQUIRE(eventually([&] { return written() > 0; }, 10s));
  const auto t0 = std::chrono::steady_clock::now();
  BOOST_TEST_REQUIRE(eventually([&] { return written() >= total; }, 30s), written());
  const double rate =
      total / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BOOST_TEST_MESSAGE("the group wrote " << rate << " frames/s; its members read 60000");
  BOOST_TEST(rate >= 0.95 * 60000);  // before: 0.6-0.8 of it
  BOOST_TEST_REQUIRE(sender.wait_exit(20s).value_or(-1) == 0, sender.log());
}

// (3) `address`: 50 addresses, each on exactly one member, in order; one member killed: only
// its addresses move (each to one survivor), still in order.
BOOST_AUTO_TEST_CASE(address_keeps_each_address_on_one_member_and_moves_only_the_dead_ones) {
  auto a = std::make_unique<test_consumer>();
  test_consumer b, c;
  const std::vector<std::string> members{a->endpoint(), b.endpoint(), c.endpoint()};
  const std::string dead = a->endpoint();
  gateway_fixture gw(
      group_toml("billing", members, "balance = \"address\"") + route_toml("k.>", {"billing"}),
      "reconnect_max_ms = 200");
  BOOST_TEST_REQUIRE(members_connected(gw, "billing", members));
  constexpr int addresses = 50;
  constexpr std::uint64_t per_round = 40;
  test_supplier s(gw.supplier_port);
  const auto send_round = [&](std::uint64_t round) {
    std::string bytes;
    for (std::uint64_t i = round * per_round; i < (round + 1) * per_round; ++i)
      for (int k = 0; k < addresses; ++k)
        protocol::append_frame(bytes, "k." + std::to_string(k), payload(i));
    s.send(bytes);
  };
  // Where each address went, checking order per address and consumer.
  const auto owners = [](const std::vector<test_consumer*>& ms, std::uint64_t rounds) {
    std::map<std::string, std::set<std::string>> where;
    for (auto* m : ms) {
      std::map<std::string, std::uint64_t> last;
      for (const auto& f : m->frames()) {
        where[f.address].insert(m->endpoint());
        const auto seq = seq_of(f.payload);
        auto [it, fresh] = last.emplace(f.address, seq);
        if (!fresh) {
          BOOST_TEST_INFO(f.address << " on " << m->endpoint());
          BOOST_TEST(seq > it->second);
          it->second = seq;
        }
      }
    }
    (void)rounds;
    return where;
  };
  send_round(0);
  BOOST_TEST_REQUIRE(
      eventually([&] { return a->count() + b.count() + c.count() >= addresses * per_round; }, 10s));
  auto before = owners({a.get(), &b, &c}, 1);
  BOOST_TEST_REQUIRE(before.size() == static_cast<std::size_t>(addresses));
  std::set<std::string> on_dead;
  for (const auto& [address, where] : before) {
    BOOST_TEST_INFO(address);
    BOOST_TEST(where.size() == 1u);
    if (*where.begin() == dead) on_dead.insert(address);
  }
  BOOST_TEST_REQUIRE(!on_dead.empty());
  BOOST_TEST_REQUIRE(on_dead.size() < static_cast<std::size_t>(addresses));
  // Member a dies (its listener too: it stays down).
  a.reset();
  BOOST_TEST_REQUIRE(members_connected(gw, "billing", {dead}, 0, 20s));
  const std::size_t got_before = b.count() + c.count();
  send_round(1);
  const std::size_t expected_now = got_before + addresses * per_round;
  BOOST_TEST_REQUIRE(eventually([&] { return b.count() + c.count() >= expected_now; }, 10s));
  const auto after = owners({&b, &c}, 2);
  for (const auto& [address, where] : after) {
    BOOST_TEST_INFO(address);
    BOOST_TEST(where.size() == 1u);  // one survivor each
    if (!on_dead.count(address)) {
      BOOST_TEST(*where.begin() == *before.at(address).begin());  // did not move
    }
  }
  BOOST_TEST(after.size() == static_cast<std::size_t>(addresses));
}

// (4) `ack = true`: a member SIGKILLed with frames written to it and not acknowledged (its
// reader stalled): every frame reaches a live member, duplicates counted, within
// consumer_timeout_ms + 1 s of the kill.
BOOST_AUTO_TEST_CASE(a_killed_ack_member_hands_its_unacknowledged_frames_to_the_others) {
  temp_dir peers;
  peer_receiver victim = stalling_ack_member(peers);
  const std::string at = victim.endpoint();
  auto& killed = victim.process;
  test_consumer b, c;
  b.acknowledge(true);
  c.acknowledge(true);
  const std::vector<std::string> members{at, b.endpoint(), c.endpoint()};
  gateway_fixture gw(group_toml("billing", members, "ack = true\nqueue_capacity = 100000") +
                         route_toml("t.>", {"billing"}),
                     "slow_consumer_ms = 60000\nconsumer_timeout_ms = 2000");
  BOOST_TEST_REQUIRE(members_connected(gw, "billing", members));
  constexpr std::uint64_t total = 30000;
  test_supplier s(gw.supplier_port);
  s.send(frames("t.a", 0, 3000));
  BOOST_TEST_REQUIRE(killed->wait_for_log("stalled", 20s).has_value(), killed->log());
  s.send(frames("t.a", 3000, total / 2));
  const std::string unacked = member_series("gatewayd_consumer_unacked_frames", "billing", at);
  BOOST_TEST_REQUIRE(eventually([&] { return scrape_metric(gw.metrics_port, unacked) > 0; }, 10s));
  killed->signal(SIGKILL);
  const auto t0 = std::chrono::steady_clock::now();
  BOOST_TEST_REQUIRE(killed->wait_exit(10s).has_value());
  s.send(frames("t.a", total / 2, total));
  const auto all_seen = [&] {
    union_of u;
    u.add(b.frames());
    u.add(c.frames());
    for (const auto seq : printed(killed->log())) {
      u.seen.insert(seq);
      ++u.total;
    }
    return u;
  };
  BOOST_TEST_REQUIRE(eventually([&] { return all_seen().seen.size() >= total; },
                                std::chrono::milliseconds(2000 + 1000) * peer_slowdown() + 2s),
                     all_seen().seen.size());
  const auto took = std::chrono::steady_clock::now() - t0;
  const auto u = all_seen();
  BOOST_TEST(u.seen.size() == total);  // lost = 0
  BOOST_TEST_MESSAGE("duplicates "
                     << u.duplicates() << ", all delivered "
                     << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                     << " ms after the kill");
  BOOST_TEST(took <= std::chrono::milliseconds(2000 + 1000) * peer_slowdown());
  BOOST_TEST(scrape_metric(gw.metrics_port,
                           member_series("gatewayd_consumer_handovers_total", "billing", at)) >= 1);
  BOOST_TEST(b.corruptions() + c.corruptions() == 0u);
}

// (4, every member behind) The same kill while every member is congested (the supply is more
// than they read, `slow_consumer_ms` short): the killed member's queue and unacknowledged
// frames go to the members that are still connected, congested or not, and what comes after
// goes only to them. Before, a handover needed a member that kept up, so nothing moved: the
// dead member held its frames (and was given new ones) until it came back.
// The test makes that state itself, on any host: one member stops reading, the other two read
// 1,000 frames/s each, and the supply goes on, a batch at a time (500 frames of 16 KiB to each
// member, half a second of reading for the slow ones), until the gauges say every member is
// congested and the stopped one holds frames unacknowledged. (It hoped once that 6,000 frames
// would get there; on a fast host the stopped member had read its share before it stopped.)
BOOST_AUTO_TEST_CASE(a_member_killed_while_all_are_behind_hands_over_to_the_connected_ones) {
  temp_dir peers;
  peer_receiver victim = stalling_ack_member(peers);
  const std::string at = victim.endpoint();
  auto& killed = victim.process;
  peer_receiver b(peers, "b", {"--ack", "--print", "--rate", "1000"});
  peer_receiver c(peers, "c", {"--ack", "--print", "--rate", "1000"});
  const std::vector<std::string> members{at, b.endpoint(), c.endpoint()};
  gateway_fixture gw(
      group_toml("billing", members,
                 "ack = true\noverflow = \"backpressure\"\nqueue_capacity = 100000") +
          route_toml("t.>", {"billing"}),
      "slow_consumer_ms = 50\nconsumer_timeout_ms = 2000");
  BOOST_TEST_REQUIRE(members_connected(gw, "billing", members));
  test_supplier s(gw.supplier_port);
  std::uint64_t sent = 0;
  const auto supply = [&](std::uint64_t n) {
    s.send(padded_frames("t.a", sent, sent + n, 16384));
    sent += n;
  };
  const auto series = [&](const std::string& metric, const std::string& member) {
    return scrape_metric(gw.metrics_port, member_series(metric, "billing", member));
  };
  const auto all_behind = [&] {
    for (const auto& m : members)
      if (series("gatewayd_consumer_congested", m) != 1) return false;
    return series("gatewayd_consumer_unacked_frames", at) > 0;
  };
  constexpr std::uint64_t batch = 1500, most = 12 * batch;
  supply(batch);
  BOOST_TEST_REQUIRE(killed->wait_for_log("stalled", 20s).has_value(), killed->log());
  // The two slow members catch up for moments between batches (a batch is half a second of
  // their reading): the state is taken when one scrape saw it, and the kill follows at once.
  bool behind = false;
  while (!(behind = eventually(all_behind, 200ms)) && sent < most)
    supply(batch);
  BOOST_TEST_REQUIRE(
      behind, "after " << sent << " frames: congested " << series("gatewayd_consumer_congested", at)
                       << " " << series("gatewayd_consumer_congested", members[1]) << " "
                       << series("gatewayd_consumer_congested", members[2]) << ", unacknowledged "
                       << series("gatewayd_consumer_unacked_frames", at));
  const std::uint64_t behind_at = sent, total = sent + 600;
  killed->signal(SIGKILL);
  const auto t0 = std::chrono::steady_clock::now();
  BOOST_TEST_REQUIRE(killed->wait_exit(10s).has_value());
  supply(total - sent);
  // The dead member holds nothing within consumer_timeout_ms + 1 s of its death.
  BOOST_TEST_REQUIRE(eventually(
      [&] {
        return series("gatewayd_consumer_connected", at) == 0 &&
               series("gatewayd_consumer_queue_depth", at) == 0 &&
               series("gatewayd_consumer_unacked_frames", at) == 0;
      },
      std::chrono::milliseconds(2000 + 1000) * peer_slowdown()));
  const auto took = std::chrono::steady_clock::now() - t0;
  BOOST_TEST(series("gatewayd_consumer_handovers_total", at) >= 1);
  // And every frame reaches a member: what the survivors printed, with what the dead one had.
  const auto seen = [&] {
    std::set<std::uint64_t> u;
    for (const auto* log : {&killed, &b.process, &c.process})
      for (const auto seq : printed((*log)->log()))
        u.insert(seq);
    return u;
  };
  // b and c read 2,000 frames/s together: what they were behind by, with a margin.
  BOOST_TEST_REQUIRE(
      eventually([&] { return seen().size() >= total; }, std::chrono::seconds(10 + total / 1000)),
      seen().size() << " of " << total);
  BOOST_TEST_MESSAGE("all behind after "
                     << behind_at << " frames; the dead member held nothing "
                     << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                     << " ms after the kill");
}

// (4, confirms) A confirm-mode supplier into an `ack = true` group whose member is SIGKILLed
// holding frames it had not acknowledged: the handover keeps each CONFIRM frame owed (never
// rejected), the member that takes it over settles it, and every frame is confirmed.
BOOST_AUTO_TEST_CASE(a_handover_keeps_confirm_frames_owed_and_confirms_them_all) {
  temp_dir peers;
  peer_receiver victim(peers, "killed", {"--ack", "--stall-after", "0.2"});
  const std::string at = victim.endpoint();
  auto& killed = victim.process;
  test_consumer b;
  b.acknowledge(true);
  const std::vector<std::string> members{at, b.endpoint()};
  gateway_fixture gw(group_toml("billing", members, "ack = true\nqueue_capacity = 100000") +
                         route_toml("orders.>", {"billing"}),
                     "slow_consumer_ms = 60000\nconsumer_timeout_ms = 2000");
  BOOST_TEST_REQUIRE(members_connected(gw, "billing", members));
  constexpr std::size_t total = 20000;
  daemon_process sender(
      peer_binary(),
      {"send", "--to", "127.0.0.1:" + std::to_string(gw.supplier_port), "--address",
       "orders.eu.created", "--size", "256", "--rate", "10000", "--count", std::to_string(total),
       "--confirm", "--window", "50000", "--confirm-wait", "20", "--json"},
      peers.path() / "send.log");
  BOOST_TEST_REQUIRE(killed->wait_for_log("stalled", 20s).has_value(), killed->log());
  const std::string unacked = member_series("gatewayd_consumer_unacked_frames", "billing", at);
  BOOST_TEST_REQUIRE(eventually([&] { return scrape_metric(gw.metrics_port, unacked) > 0; }, 10s));
  killed->signal(SIGKILL);
  BOOST_TEST_REQUIRE(killed->wait_exit(10s).has_value());
  BOOST_TEST_REQUIRE(sender.wait_exit(40s).has_value(), sender.log());
  const auto log = sender.log();
  BOOST_TEST(json_field(log, "confirmed") == static_cast<long long>(total), log);
  BOOST_TEST(json_field(log, "rejected") == 0, log);
  BOOST_TEST(json_field(log, "unconfirmed") == 0, log);
}

// (5) Every member down: the group holds the frames (each member under its own limits); one
// comes up and everything drains to it, including what the other member held.
BOOST_AUTO_TEST_CASE(all_members_down_then_one_back_drains_the_group_to_it) {
  const unsigned short pa = free_port();
  const unsigned short pb = free_port();
  const std::string ea = "127.0.0.1:" + std::to_string(pa);
  const std::string eb = "127.0.0.1:" + std::to_string(pb);
  gateway_fixture gw(group_toml("billing", {ea, eb}) + route_toml("t.>", {"billing"}),
                     "reconnect_max_ms = 200");
  constexpr std::uint64_t total = 2000;
  test_supplier s(gw.supplier_port);
  s.send(frames("t.a", 0, total));
  // Held by the two members, none of them up.
  BOOST_TEST_REQUIRE(eventually(
      [&] {
        return scrape_metric(gw.metrics_port,
                             member_series("gatewayd_consumer_queue_depth", "billing", ea)) +
                   scrape_metric(gw.metrics_port,
                                 member_series("gatewayd_consumer_queue_depth", "billing", eb)) ==
               total;
      },
      10s));
  BOOST_TEST(scrape_metric(gw.metrics_port,
                           member_series("gatewayd_consumer_queue_depth", "billing", eb)) > 0);
  test_consumer a(pa);
  BOOST_TEST_REQUIRE(a.wait_for_count(total, 10s), a.count());
  union_of u;
  u.add(a.frames());
  BOOST_TEST(u.seen.size() == total);
  BOOST_TEST(u.duplicates() == 0u);
}

// (6) A reload adds a member (it takes its share at once) and removes one whose queue was
// full (its frames go on, to the others or its own endpoint, none lost).
BOOST_AUTO_TEST_CASE(a_reload_adds_and_removes_members_in_place) {
  test_consumer a, b, c;
  gateway_fixture gw(
      group_toml("billing", {a.endpoint(), b.endpoint()}, "queue_capacity = 100000") +
          route_toml("t.>", {"billing"}),
      "slow_consumer_ms = 60000");
  BOOST_TEST_REQUIRE(members_connected(gw, "billing", {a.endpoint(), b.endpoint()}));
  test_supplier s(gw.supplier_port);
  constexpr std::uint64_t round = 20000;
  // b stops reading: what it is given (more than its kernel buffers take) queues up for it.
  b.stall(true);
  s.send(frames("t.a", 0, round, 1024));
  BOOST_TEST_REQUIRE(eventually(
      [&] {
        return scrape_metric(gw.metrics_port, member_series("gatewayd_consumer_queue_depth",
                                                            "billing", b.endpoint())) > 0;
      },
      10s));
  replace_file(gw.routes_path(),
               group_toml("billing", {a.endpoint(), c.endpoint()}, "queue_capacity = 100000") +
                   route_toml("t.>", {"billing"}));
  gw.daemon->signal(SIGHUP);
  BOOST_TEST_REQUIRE(gw.daemon->wait_for_log("routing table reloaded (SIGHUP)", 10s).has_value());
  BOOST_TEST_REQUIRE(members_connected(gw, "billing", {c.endpoint()}));
  const std::size_t c_before = c.count();
  s.send(frames("t.a", round, 2 * round, 1024));
  // While b still reads nothing: everything but what its socket took (and the one write batch
  // it has out, at most 1024 frames) reaches a and c, b's queue included.
  const std::string b_sent =
      member_series("gatewayd_consumer_messages_sent_total", "billing", b.endpoint());
  BOOST_TEST_REQUIRE(
      eventually(
          [&] {
            return a.count() + c.count() + scrape_metric(gw.metrics_port, b_sent) + 1024 >=
                   2 * round;
          },
          10s),
      a.count() << " + " << c.count() << " + " << scrape_metric(gw.metrics_port, b_sent));
  b.stall(false);
  BOOST_TEST_REQUIRE(eventually(
      [&] {
        union_of u;
        u.add(a.frames());
        u.add(b.frames());
        u.add(c.frames());
        return u.seen.size() >= 2 * round;
      },
      20s));
  union_of u;
  u.add(a.frames());
  u.add(b.frames());
  u.add(c.frames());
  BOOST_TEST(u.seen.size() == 2 * round);
  BOOST_TEST(u.duplicates() == 0u);
  // The new member took its turns at once: about half of the second round on a quiet host (and
  // part of what b had queued), less when its reader lags and its socket refuses for moments
  // (42 % beside a compiler); a member the reload had not added would take none.
  BOOST_TEST(c.count() - c_before >= round / 4, c.count() - c_before << " of " << round);
  for (const auto& f : b.frames()) {
    BOOST_TEST_INFO(seq_of(f.payload));
    BOOST_TEST(seq_of(f.payload) < round);  // nothing routed after the reload went to b
  }
}

// A consumer may turn from one endpoint into a group and back by a reload: each table's frames
// go where it says, none lost.
BOOST_AUTO_TEST_CASE(a_reload_turns_a_consumer_into_a_group_and_back) {
  test_consumer a, b;
  const auto single = consumer_toml("billing", a.endpoint()) + route_toml("t.>", {"billing"});
  const auto group =
      group_toml("billing", {a.endpoint(), b.endpoint()}) + route_toml("t.>", {"billing"});
  gateway_fixture gw(single);
  BOOST_TEST_REQUIRE(gw.consumers_connected({"billing"}));
  test_supplier s(gw.supplier_port);
  constexpr std::uint64_t step = 1000;
  std::size_t reloads = 0;
  const auto reload = [&](const std::string& routes) {
    replace_file(gw.routes_path(), routes);
    gw.daemon->signal(SIGHUP);
    ++reloads;
    return eventually(
        [&] { return gw.daemon->count_in_log("routing table reloaded (SIGHUP)") >= reloads; }, 10s);
  };
  s.send(frames("t.a", 0, step));
  BOOST_TEST_REQUIRE(a.wait_for_count(step, 10s));
  BOOST_TEST_REQUIRE(reload(group));
  BOOST_TEST_REQUIRE(members_connected(gw, "billing", {a.endpoint(), b.endpoint()}));
  s.send(frames("t.a", step, 2 * step));
  BOOST_TEST_REQUIRE(eventually([&] { return a.count() + b.count() >= 2 * step; }, 10s));
  BOOST_TEST(b.count() >= step / 2 - step / 10);  // its share of the group's frames
  BOOST_TEST_REQUIRE(reload(single));
  BOOST_TEST_REQUIRE(gw.consumers_connected({"billing"}));
  const std::size_t b_before = b.count();
  s.send(frames("t.a", 2 * step, 3 * step));
  BOOST_TEST_REQUIRE(eventually([&] { return a.count() + b.count() >= 3 * step; }, 10s));
  BOOST_TEST(b.count() == b_before);  // one endpoint again: nothing more for b
  union_of u;
  u.add(a.frames());
  u.add(b.frames());
  BOOST_TEST(u.seen.size() == 3 * step);
  BOOST_TEST(u.duplicates() == 0u);
}
