// Issue 46: a consumer's spool on disk, end to end with the real daemon, the real gateway-peer
// and real files. A consumer away while millions of frames pass gets them all, in order, and no
// supplier waits; a stop and a SIGKILL lose nothing confirmed; a torn tail is cut and counted; a
// full disk refuses new frames for that consumer alone.
#include <sys/mount.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <csignal>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "protocol/frame_codec.hpp"
#include "tests/support/binaries.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/http_get.hpp"
#include "tests/support/peer_tool.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"
#include "tests/support/wait_until.hpp"
#include "tools/traffic/payload.hpp"

using namespace gatewayd::test;
using gatewayd::traffic::numbered_payload;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

std::string endpoint(unsigned short port) {
  return "127.0.0.1:" + std::to_string(port);
}

// Fewer under a sanitizer: the same paths, at a tenth of the speed.
long long scaled(long long n) {
  return instrumented() ? n / 10 : n;
}

std::string spool_gateway(const fs::path& dir) {
  return "spool_dir = \"" + dir.string() + "\"\nspool_sync_ms = 10\n";
}

std::string spooled(const std::string& name, unsigned short port,
                    const std::string& extra = "spool_max_bytes = 4294967296\n") {
  return consumer_toml(name, endpoint(port), "queue_capacity = 10000\n" + extra);
}

double metric(const gateway_fixture& gw, const std::string& series) {
  return scrape_metric(gw.metrics_port, series);
}

// `gateway-peer send` of `count` frames of 128 bytes to s.x, to completion.
std::string send(const gateway_fixture& gw, long long count, bool confirm = false,
                 long long rate = 0, const std::string& log = "send.log") {
  std::vector<std::string> args{"send", "--to",    endpoint(gw.supplier_port), "--address",
                                "s.x",  "--count", std::to_string(count),      "--json"};
  if (rate) {
    args.emplace_back("--rate");
    args.push_back(std::to_string(rate));
  }
  if (confirm) {
    for (const char* a : {"--confirm", "--window", "10000", "--confirm-wait", "30"})
      args.emplace_back(a);
  }
  daemon_process s(peer_binary(), args, gw.dir.path() / log);
  const auto code = s.wait_exit(instrumented() ? 600s : 120s);
  BOOST_TEST_REQUIRE(code.has_value(), s.log());
  BOOST_TEST_REQUIRE(*code == 0, s.log());
  return s.log();
}

// A receiver on `port` (let go for it) that exits once `count` distinct frames came; its JSON
// summary.
std::string receive(const gateway_fixture& gw, refused_port& port, long long count,
                    const std::string& log = "recv.log") {
  port.release();
  daemon_process r(peer_binary(),
                   {"recv", "--listen", endpoint(port.number()), "--expect", std::to_string(count),
                    "--one-consumer", "--json"},
                   gw.dir.path() / log);
  const auto code = r.wait_exit(instrumented() ? 600s : 120s);
  BOOST_TEST_REQUIRE(code.has_value(), r.log() << "\n" << gw.daemon->log());
  BOOST_TEST(*code == 0, r.log() << "\n" << gw.daemon->log());
  return r.log();
}

}  // namespace

// Test 1: a consumer away while 2,000,000 frames are sent (capacity 10,000) gets every one after
// it returns, in order; the supplier never pauses; the gateway's memory stays bounded.
BOOST_AUTO_TEST_CASE(a_consumer_away_gets_millions_of_frames_in_order_and_nobody_waits) {
  refused_port port;  // a is away until the test listens there
  temp_dir spool;
  gateway_fixture gw(spooled("a", port.number()) + route_toml("s.>", {"a"}),
                     spool_gateway(spool.path()));
  const long idle_kib = gw.rss_kib();
  const long long n = scaled(2'000'000);
  // At a rate the disk keeps up with (here it writes 5M frames/s): faster, the gateway pauses
  // the supplier as for its own lag (a few MiB behind the disk), which is not the consumer's.
  send(gw, n, false, scaled(400'000));
  BOOST_TEST_REQUIRE(
      eventually([&] { return metric(gw, "gatewayd_consumer_spool_frames{consumer=\"a\"}") == n; },
                 60s),
      "spooled " << metric(gw, "gatewayd_consumer_spool_frames{consumer=\"a\"}"));
  // /connz shows the spool beside the queue: what it holds, since when, where.
  {
    const auto connz = nlohmann::json::parse(http_get(gw.metrics_port, "/connz").body);
    const nlohmann::json* a = nullptr;
    for (const auto& c : connz["consumers"])
      if (c["name"] == "a") a = &c;
    BOOST_TEST_REQUIRE(a != nullptr);
    const auto& sp = (*a)["spool"];
    BOOST_TEST(sp["frames"].get<long long>() == n, sp.dump());
    BOOST_TEST(sp["bytes"].get<long long>() > 128 * n, sp.dump());
    BOOST_TEST(sp["max_bytes"].get<long long>() == 4294967296LL);
    BOOST_TEST(sp["dir"].get<std::string>() == (spool.path() / "a").string());
    BOOST_TEST(sp["oldest_age_ms"].get<long long>() >= 0, sp.dump());
    BOOST_TEST(sp["oldest_at"].is_string(), sp.dump());
    BOOST_TEST(sp["written"]["frames"].get<long long>() == n, sp.dump());
    BOOST_TEST(!sp["full"].get<bool>());
    BOOST_TEST((*a)["queue"]["depth"].get<long long>() == 0);  // on disk, not in memory
  }
  BOOST_TEST(metric(gw, "gatewayd_supplier_backpressure_pauses_total") == 0);
  BOOST_TEST(
      metric(gw,
             "gatewayd_consumer_dropped_messages_total{consumer=\"a\",reason=\"queue_full\"}") ==
      0);
  // The frames wait on disk, not in memory (the queue alone could hold 10,000).
  BOOST_TEST(gw.peak_rss_kib() - idle_kib < 128 * 1024 * memory_slack(),
             "peak RSS " << gw.peak_rss_kib() << " KiB, idle " << idle_kib << " KiB");
  const std::string summary = receive(gw, port, n);
  BOOST_TEST(json_field(summary, "lost") == 0, summary);
  BOOST_TEST(json_field(summary, "reordered") == 0, summary);
  BOOST_TEST_REQUIRE(eventually(
      [&] { return metric(gw, "gatewayd_consumer_spool_frames{consumer=\"a\"}") == 0; }, 30s));
  // Whole segment files are deleted once delivered: the folder is near empty again.
  std::uintmax_t left = 0;
  for (const auto& e : fs::recursive_directory_iterator(spool.path()))
    if (e.is_regular_file()) left += e.file_size();
  BOOST_TEST(left < (64u << 20) + 4096, left << " bytes left in the spool");
}

// Test 3: a stop with frames in memory (a connected consumer that does not read: its queue full)
// and in the spool (what its queue could not hold): all of them arrive after the next start.
BOOST_AUTO_TEST_CASE(a_stop_keeps_what_memory_and_spool_hold_for_the_next_start) {
  test_consumer a;
  a.stall(true);
  temp_dir spool;
  // Its socket refuses bytes and it stays in its grace (slow_consumer_ms): the queue fills to
  // its 10,000 frames in memory, the rest goes to the spool.
  gateway_fixture gw(
      consumer_toml("a", a.endpoint(), "queue_capacity = 10000\nspool_max_bytes = 1073741824\n") +
          route_toml("s.>", {"a"}),
      spool_gateway(spool.path()) + "slow_consumer_ms = 600000\nconsumer_timeout_ms = 0\n");
  BOOST_TEST_REQUIRE(a.wait_for_connections(1, 10s));
  // Not scaled down under a sanitizer: the kernel's socket buffers alone take ~30,000 frames,
  // and the queue (10,000) and the spool must hold the rest.
  const long long n = 100'000;
  {
    test_supplier s(gw.supplier_port);
    std::string batch;
    for (long long i = 0; i < n; ++i) {
      batch += gatewayd::protocol::encode_frame(
          "s.x", numbered_payload(1, static_cast<std::uint64_t>(i), 128));
      if (batch.size() > 256 * 1024) {
        s.send(batch);
        batch.clear();
      }
    }
    s.send(batch);
  }
  const auto in_memory = [&] {
    return metric(gw, "gatewayd_consumer_queue_depth{consumer=\"a\"}");
  };
  const auto on_disk = [&] { return metric(gw, "gatewayd_consumer_spool_frames{consumer=\"a\"}"); };
  // Every frame in before the stop: what is still in the gateway's socket then was never its to
  // keep (the supplier asked for no confirms).
  const auto received = [&] { return metric(gw, "gatewayd_supplier_messages_received_total"); };
  BOOST_TEST_REQUIRE(
      eventually([&] { return received() == n && in_memory() >= 10000 && on_disk() > 0; }, 30s),
      "received " << received() << ", queued " << in_memory() << ", spooled " << on_disk() << "\n"
                  << http_get(gw.metrics_port, "/metrics").body << gw.daemon->log());
  // What its socket took (the kernel's buffers): read from the first connection after the stop.
  const auto written =
      static_cast<std::size_t>(metric(gw, "gatewayd_consumer_messages_sent_total{consumer=\"a\"}"));
  gw.daemon->signal(SIGTERM);
  const auto code = gw.daemon->wait_exit(20s);
  BOOST_TEST_REQUIRE(code.has_value(), gw.daemon->log());
  BOOST_TEST(*code == 0);
  BOOST_TEST(gw.daemon->count_in_log("frames undelivered at shutdown") == 0u, gw.daemon->log());
  a.stall(false);
  BOOST_TEST_REQUIRE(a.wait_for_count(written, 20s), "got " << a.count() << " of " << written);
  // The rest, memory's and the spool's, from the spool after the start: every frame once.
  const std::string first_run = gw.daemon->log();
  gw.restart("gatewayd2.log");
  BOOST_TEST(gw.daemon->count_in_log("delivered first") >= 1u, gw.daemon->log());
  BOOST_TEST_REQUIRE(a.wait_for_count(static_cast<std::size_t>(n), 60s),
                     "got " << a.count() << "\nfirst run:\n"
                            << first_run << "after the restart:\n"
                            << gw.daemon->log() << http_get(gw.metrics_port, "/connz").body);
  std::vector<bool> seen(static_cast<std::size_t>(n));
  std::size_t twice = 0;
  for (const auto& f : a.frames()) {
    const auto h = gatewayd::traffic::read_header(f.payload);
    BOOST_TEST_REQUIRE(h.has_value());
    if (seen.at(h->sequence)) ++twice;
    seen.at(h->sequence) = true;
  }
  BOOST_TEST(twice == 0u);
  BOOST_TEST(a.corruptions() == 0u);
}

// Test 2: SIGKILL while a confirm supplier streams to a consumer that is away: every frame that
// was confirmed arrives after the restart.
BOOST_AUTO_TEST_CASE(a_sigkill_loses_no_confirmed_frame) {
  refused_port port;  // a is away until the test listens there
  temp_dir spool;
  gateway_fixture gw(spooled("a", port.number()) + route_toml("s.>", {"a"}),
                     spool_gateway(spool.path()));
  gw.keep_ports();
  const long long n = scaled(200'000);
  const std::string sent = send(gw, n, true);
  // Away all along, yet confirmed: the spool answered for every frame once it was synced.
  BOOST_TEST_REQUIRE(json_field(sent, "confirmed") == n, sent);
  gw.daemon->signal(SIGKILL);
  BOOST_TEST_REQUIRE(gw.daemon->wait_exit(10s).has_value());
  gw.restart("gatewayd2.log");
  const std::string summary = receive(gw, port, n);
  BOOST_TEST(json_field(summary, "lost") == 0, summary);
}

// Test 4: the last segment cut mid-record (a write a crash tore): the torn record is cut and
// counted, never delivered; everything before it is delivered, in order.
BOOST_AUTO_TEST_CASE(a_torn_tail_is_cut_and_counted_and_the_rest_delivered) {
  refused_port port;  // a is away until the test listens there
  temp_dir spool;
  gateway_fixture gw(spooled("a", port.number()) + route_toml("s.>", {"a"}),
                     spool_gateway(spool.path()));
  gw.keep_ports();
  const long long n = scaled(100'000);
  send(gw, n);
  BOOST_TEST_REQUIRE(eventually(
      [&] { return metric(gw, "gatewayd_consumer_spool_frames{consumer=\"a\"}") == n; }, 60s));
  gw.daemon->signal(SIGTERM);
  BOOST_TEST_REQUIRE(gw.daemon->wait_exit(20s).has_value());
  // The newest segment file loses its last 100 bytes: its last record (about 170) is torn.
  fs::path last;
  for (const auto& e : fs::directory_iterator(spool.path() / "a"))
    if (e.path().extension() == ".seg" && (last.empty() || e.path() > last)) last = e.path();
  BOOST_TEST_REQUIRE(!last.empty());
  fs::resize_file(last, fs::file_size(last) - 100);
  gw.restart("gatewayd2.log");
  BOOST_TEST(metric(gw, "gatewayd_consumer_spool_torn_records_total{consumer=\"a\"}") == 1);
  BOOST_TEST(metric(gw, "gatewayd_consumer_spool_frames{consumer=\"a\"}") == n - 1);
  BOOST_TEST(gw.daemon->count_in_log("torn tail") >= 1u, gw.daemon->log());
  const std::string summary = receive(gw, port, n - 1);
  BOOST_TEST(json_field(summary, "reordered") == 0, summary);
  // The torn one is the last frame sent: all before it came.
  BOOST_TEST(json_field(summary, "lost") == 0, summary);
}

// Test 5: the disk full (a small tmpfs): the spooled consumer's new frames are refused and
// counted; a consumer beside it, without a spool, gets every frame.
BOOST_AUTO_TEST_CASE(a_full_disk_refuses_new_frames_for_its_consumer_alone) {
  if (::geteuid() != 0) {
    BOOST_TEST_MESSAGE("not root: a tmpfs cannot be mounted; skipped");
    return;
  }
  temp_dir spool;
  BOOST_TEST_REQUIRE(::mount("tmpfs", spool.path().c_str(), "tmpfs", 0, "size=8m") == 0);
  struct unmount {
    fs::path at;
    ~unmount() { ::umount2(at.c_str(), MNT_DETACH); }
  } guard{spool.path()};
  refused_port port;  // a is away until the test listens there
  test_consumer b;
  gateway_fixture gw(spooled("a", port.number()) + consumer_toml("b", b.endpoint()) +
                         route_toml("s.>", {"a", "b"}),
                     spool_gateway(spool.path()));
  BOOST_TEST_REQUIRE(gw.consumers_connected({"b"}));
  const long long n = 100'000;  // 17 MB of records: twice what the disk holds
  send(gw, n);
  // The disk fills while the spool thread is behind (under TSan it is): the supplier, paused for
  // the lag, must go on though the spool is full (consumer_spool_pause_test has each step).
  BOOST_TEST(b.wait_for_count(n, 60s), "b got " << b.count() << " (" << b.bytes_read()
                                                << " bytes read, " << b.unparsed_bytes()
                                                << " not yet a frame)\n"
                                                << gw.daemon->log());
  BOOST_TEST(b.corruptions() == 0u);
  BOOST_TEST_REQUIRE(
      eventually(
          [&] { return metric(gw, "gatewayd_consumer_spool_no_space_total{consumer=\"a\"}") >= 1; },
          20s),
      gw.daemon->log());
  const auto refused = [&] {
    return metric(gw, "gatewayd_consumer_spool_refused_frames_total{consumer=\"a\"}");
  };
  const auto held = [&] { return metric(gw, "gatewayd_consumer_spool_frames{consumer=\"a\"}"); };
  // Every frame is either on the disk or counted as refused, once the spool thread has done
  // what it was handed (a slower build is still at it when the first ENOSPC is counted).
  BOOST_TEST(eventually([&] { return refused() + held() == n; }, 60s),
             "refused " << refused() << ", held " << held());
  BOOST_TEST(refused() > 0);
  gw.daemon->signal(SIGTERM);
  BOOST_TEST(gw.daemon->wait_exit(20s).has_value());
}
