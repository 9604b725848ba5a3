// A flood of garbage supplier connections against the real daemon must not flood its log:
// each kind of line is written at most once a second, with a count of what it suppressed, so
// a reload error logged right after the flood is still there to read, and every suppressed
// event is still accounted for in the log.
#include <boost/test/unit_test.hpp>

#include <asio.hpp>
#include <atomic>
#include <csignal>
#include <regex>
#include <sstream>
#include <thread>

#include "tests/support/gateway_fixture.hpp"
#include "tests/support/scrape.hpp"
#include "tests/support/test_peers.hpp"

using namespace gatewayd::test;
using namespace std::chrono_literals;
using asio::ip::tcp;

namespace {

// Writes `bytes`, half-closes when asked, then waits for the gateway to close its side. The
// side that sends the first FIN keeps the TIME_WAIT: half-closing first keeps it here, where
// Linux reuses loopback ports after a second, instead of filling the daemon's port pairs.
void garbage_connection(asio::io_context& ioc, unsigned short port, std::string_view bytes,
                        bool half_close) {
  tcp::socket s(ioc);
  std::error_code ec;
  s.connect({asio::ip::address_v4::loopback(), port}, ec);
  if (ec) return;
  asio::write(s, asio::buffer(bytes.data(), bytes.size()), ec);
  if (half_close) s.shutdown(tcp::socket::shutdown_send, ec);
  char sink[64];
  while (!ec)
    s.read_some(asio::buffer(sink), ec);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  return out;
}

// Events of one kind the log accounts for: each line written for one (`event`), plus the
// "(N more suppressed)" it carries, plus the "<kind>: N more suppressed" summary lines.
std::uint64_t accounted(const std::vector<std::string>& lines, const std::string& event,
                        const std::string& kind) {
  static const std::regex more(R"((\d+) more suppressed)");
  std::uint64_t n = 0;
  for (const auto& line : lines) {
    const bool summary = line.find(kind + ": ") != std::string::npos;
    if (!summary && line.find(event) == std::string::npos) continue;
    n += !summary;
    std::smatch m;
    if (std::regex_search(line, m, more)) n += std::stoull(m[1]);
  }
  return n;
}

std::string closed(const std::string& reason) {
  return "gatewayd_supplier_connections_closed_total{reason=\"" + reason + "\"}";
}

}  // namespace

BOOST_AUTO_TEST_CASE(fifty_thousand_garbage_connections_leave_a_reload_error_readable) {
  test_consumer c;
  const auto good = consumer_toml("c", c.endpoint()) + route_toml("x.>", {"c"});
  gateway_fixture gw(good, "idle_timeout_ms = 100\nmax_supplier_connections = 64\n");
  BOOST_TEST_REQUIRE(gw.metrics_port != 0);
  BOOST_TEST_REQUIRE(c.wait_for_connections(1, 5s));
  const std::size_t lines_before = lines_of(gw.daemon->log()).size();

  // Three kinds of one-byte garbage: a byte that is not GWP/1 (protocol error), the first
  // byte of a header then a close (closed mid-frame), and, afterwards, the first byte then
  // silence (idle timeout), 100 at a time against a cap of 64: refusals too.
  constexpr int total = 50000;
  constexpr int silent_batches = 20, silent_batch = 100;
  constexpr int noisy = total - silent_batches * silent_batch;
  const auto start = std::chrono::steady_clock::now();
  std::atomic<int> next{0};
  auto noisy_client = [&] {
    asio::io_context ioc;
    for (int i = next++; i < noisy; i = next++)
      garbage_connection(ioc, gw.supplier_port, i % 2 ? "x" : "G", true);
  };
  std::thread noisy_a(noisy_client), noisy_b(noisy_client);
  noisy_a.join();
  noisy_b.join();
  asio::io_context ioc;
  for (int b = 0; b < silent_batches; ++b) {
    std::vector<std::thread> batch;
    for (int i = 0; i < silent_batch; ++i)
      batch.emplace_back([&] { garbage_connection(ioc, gw.supplier_port, "G", false); });
    for (auto& t : batch)
      t.join();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  BOOST_TEST_MESSAGE(total << " garbage connections in " << seconds << " s");

  const double bad_magic = scrape_metric(
      gw.metrics_port, "gatewayd_supplier_protocol_errors_total{reason=\"bad_magic\"}");
  BOOST_TEST(bad_magic >= noisy / 2 * 0.9);
  BOOST_TEST(scrape_metric(gw.metrics_port, closed("idle_timeout")) >= 100);
  BOOST_TEST(scrape_metric(gw.metrics_port, closed("connection_limit")) >= 1);

  // Then an operator's broken edit: its error must be in the log.
  gw.dir.write("routes.toml", consumer_toml("c", c.endpoint()) + route_toml("x.>", {"nobody"}));
  gw.daemon->signal(SIGHUP);
  BOOST_TEST_REQUIRE(gw.daemon->wait_for_log("reload (SIGHUP) failed with 1", 10s).has_value());
  const auto error = gw.daemon->wait_for_log(gw.routes_path() + ":6:7:", 1s);
  BOOST_TEST_REQUIRE(error.has_value());
  BOOST_TEST(error->find("unknown consumer \"nobody\"") != std::string::npos, *error);

  // Every suppressed event is still counted in the log once its second is over.
  const std::string magic_event = "protocol error bad_magic";
  bool settled = eventually(
      [&] {
        const auto lines = lines_of(gw.daemon->log());
        return accounted(lines, magic_event, "supplier protocol errors") ==
                   scrape_metric(gw.metrics_port,
                                 "gatewayd_supplier_protocol_errors_total{"
                                 "reason=\"bad_magic\"}") &&
               accounted(lines, "(idle timeout)", "supplier idle timeouts") ==
                   scrape_metric(gw.metrics_port, closed("idle_timeout")) &&
               accounted(lines, "refused supplier", "refused supplier connections") ==
                   scrape_metric(gw.metrics_port, closed("connection_limit"));
      },
      5s);
  const auto lines = lines_of(gw.daemon->log());
  BOOST_TEST(settled,
             "protocol errors in the log "
                 << accounted(lines, magic_event, "supplier protocol errors") << ", idle timeouts "
                 << accounted(lines, "(idle timeout)", "supplier idle timeouts") << ", refusals "
                 << accounted(lines, "refused supplier", "refused supplier connections")
                 << "; metrics: " << bad_magic << ", "
                 << scrape_metric(gw.metrics_port, closed("idle_timeout")) << ", "
                 << scrape_metric(gw.metrics_port, closed("connection_limit")));

  // Bounded volume: four limited kinds, each at most one line a second plus one summary line
  // a second, over the flood and the seconds after it; a few lines for the reload.
  const std::size_t written = lines.size() - lines_before;
  const auto bound = static_cast<std::size_t>(4 * 2 * (seconds + 8) + 20);
  BOOST_TEST_MESSAGE("log lines during the flood and the reload: " << written << " (bound " << bound
                                                                   << ")");
  BOOST_TEST(written <= bound);
  BOOST_TEST(gw.daemon->count_in_log("closed mid-frame") >= 1u);
  BOOST_TEST(gw.daemon->count_in_log("more suppressed") >= 1u);
}
