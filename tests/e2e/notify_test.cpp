// What the daemon tells systemd, seen from a fake NOTIFY_SOCKET the test owns: READY once it
// accepts, RELOADING/READY around SIGHUP, WATCHDOG pings from the event loop, STOPPING.
#include <boost/test/unit_test.hpp>

#include <asio.hpp>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <thread>

#include "gateway/systemd_notify.hpp"
#include "gateway/watchdog.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/notify_listener.hpp"
#include "tests/support/test_peers.hpp"

using namespace gatewayd::test;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

std::uint64_t monotonic_usec() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000u +
         static_cast<std::uint64_t>(ts.tv_nsec) / 1000u;
}

long ms(clock_type::duration d) {
  return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

bool accepts(unsigned short port) {
  asio::io_context ioc;
  asio::ip::tcp::socket s(ioc);
  std::error_code ec;
  s.connect({asio::ip::make_address("127.0.0.1"), port}, ec);
  return !ec;
}

}  // namespace

BOOST_AUTO_TEST_CASE(ready_reloading_watchdog_stopping_from_the_real_daemon) {
  temp_dir sock_dir;
  notify_listener systemd((sock_dir.path() / "notify").string());
  test_consumer c;
  // WatchdogSec=2: the daemon must ping every second.
  gateway_fixture gw(consumer_toml("c", c.endpoint()) + route_toml("n.>", {"c"}), "",
                     {systemd.env(), "WATCHDOG_USEC=2000000"});

  const auto ready = systemd.wait_for("READY=1", 10s);
  BOOST_TEST_REQUIRE(ready.has_value(), gw.daemon->log());
  // READY means serving: both listeners accept, and a frame goes through.
  BOOST_TEST(accepts(gw.supplier_port));
  BOOST_TEST(accepts(gw.metrics_port));
  const auto status = notify_listener::value_of(ready->text, "STATUS");
  BOOST_TEST_REQUIRE(status.has_value());
  BOOST_TEST(status->find("serving: 1 consumers, 1 routes") != std::string::npos, *status);
  BOOST_TEST_REQUIRE(c.wait_for_connections(1, 5s));
  test_supplier s(gw.supplier_port);
  s.send_frame("n.x", "hello");
  BOOST_TEST(c.wait_for_count(1, 5s));

  // Watchdog: pings keep coming, never further apart than the timeout.
  std::vector<clock_type::time_point> pings;
  const auto watch_until = clock_type::now() + 4s;
  while (clock_type::now() < watch_until) {
    if (auto m = systemd.next(100ms); m && notify_listener::has_line(m->text, "WATCHDOG=1"))
      pings.push_back(m->at);
  }
  BOOST_TEST(pings.size() >= 3u);
  for (std::size_t i = 1; i < pings.size(); ++i)
    BOOST_TEST(ms(pings[i] - pings[i - 1]) < 2000);

  // SIGHUP: RELOADING=1 stamped with CLOCK_MONOTONIC at the reload, then READY=1.
  const auto before = monotonic_usec();
  gw.daemon->signal(SIGHUP);
  const auto reloading = systemd.wait_for("RELOADING=1", 10s);
  BOOST_TEST_REQUIRE(reloading.has_value(), gw.daemon->log());
  const auto stamp = notify_listener::value_of(reloading->text, "MONOTONIC_USEC");
  BOOST_TEST_REQUIRE(stamp.has_value(), reloading->text);
  const auto usec = std::stoull(*stamp);
  BOOST_TEST(usec >= before);
  BOOST_TEST(usec <= monotonic_usec());
  BOOST_TEST(systemd.wait_for("READY=1", 10s).has_value());

  // SIGTERM: STOPPING=1 first, then the drain, then exit 0.
  gw.daemon->signal(SIGTERM);
  const auto stopping = systemd.wait_for("STOPPING=1", 10s);
  BOOST_TEST_REQUIRE(stopping.has_value(), gw.daemon->log());
  BOOST_TEST(notify_listener::value_of(stopping->text, "STATUS").value_or("").find("draining") !=
             std::string::npos);
  const auto code = gw.daemon->wait_exit(15s);
  BOOST_TEST_REQUIRE(code.has_value());
  BOOST_TEST(*code == 0);
  // Nothing claims the service is ready again once it is stopping.
  bool ready_after_stop = false, after = false;
  for (const auto& m : systemd.seen()) {
    after |= notify_listener::has_line(m.text, "STOPPING=1");
    ready_after_stop |= after && notify_listener::has_line(m.text, "READY=1");
  }
  BOOST_TEST(!ready_after_stop);
}

BOOST_AUTO_TEST_CASE(a_failed_reload_still_reports_ready_with_the_failure_in_status) {
  temp_dir sock_dir;
  notify_listener systemd((sock_dir.path() / "notify").string());
  test_consumer c;
  gateway_fixture gw(consumer_toml("c", c.endpoint()) + route_toml("n.>", {"c"}), "",
                     {systemd.env()});
  BOOST_TEST_REQUIRE(systemd.wait_for("READY=1", 10s).has_value());
  gw.dir.write("routes.toml", route_toml("n.>", {"nobody"}));
  gw.daemon->signal(SIGHUP);
  BOOST_TEST_REQUIRE(systemd.wait_for("RELOADING=1", 10s).has_value());
  const auto ready = systemd.wait_for("READY=1", 10s);
  BOOST_TEST_REQUIRE(ready.has_value());
  BOOST_TEST(
      notify_listener::value_of(ready->text, "STATUS").value_or("").find("last reload failed") !=
          std::string::npos,
      ready->text);
}

// In-process: the watchdog pings from the io_context, so a loop that cannot run handlers
// (every thread stuck) stops the pings, which is what lets systemd restart a wedged daemon.
BOOST_AUTO_TEST_CASE(watchdog_pings_stop_while_the_event_loop_is_wedged) {
  temp_dir sock_dir;
  notify_listener systemd((sock_dir.path() / "notify").string());
  ::setenv("NOTIFY_SOCKET", (sock_dir.path() / "notify").c_str(), 1);
  ::setenv("WATCHDOG_USEC", "200000", 1);  // ping every 100 ms
  ::unsetenv("WATCHDOG_PID");
  asio::io_context ioc;
  gatewayd::gateway::systemd_notify notify(gatewayd::runtime::make_executor(ioc));
  BOOST_TEST(notify.enabled());
  BOOST_TEST(notify.watchdog_timeout() == std::chrono::microseconds(200000));

  gatewayd::gateway::watchdog dog(gatewayd::runtime::make_executor(ioc), notify);
  BOOST_TEST(dog.period() == std::chrono::microseconds(100000));
  dog.start();
  std::thread loop([&] { ioc.run(); });

  BOOST_TEST_REQUIRE(systemd.wait_for("WATCHDOG=1", 5s).has_value());
  BOOST_TEST_REQUIRE(systemd.wait_for("WATCHDOG=1", 5s).has_value());
  // Wedge the only loop thread for 1 s: no ping may arrive meanwhile.
  std::atomic<bool> wedged{false};
  asio::post(ioc, [&] {
    wedged = true;
    std::this_thread::sleep_for(1s);
  });
  BOOST_TEST_REQUIRE(eventually([&] { return wedged.load(); }, 5s));
  while (systemd.next(0ms)) {
  }  // pings sent before the wedge
  const auto start = clock_type::now();
  const auto during = systemd.wait_for("WATCHDOG=1", 5s);
  BOOST_TEST_REQUIRE(during.has_value());
  BOOST_TEST(ms(during->at - start) >= 700);  // the next ping came only once the loop was free
  BOOST_TEST(systemd.wait_for("WATCHDOG=1", 5s).has_value());  // and they go on

  dog.stop();
  loop.join();  // stop() leaves the io_context without work: run() returns
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("WATCHDOG_USEC");
}

BOOST_AUTO_TEST_CASE(no_notify_socket_means_no_watchdog_and_no_effect) {
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("WATCHDOG_USEC");
  asio::io_context ioc;
  gatewayd::gateway::systemd_notify notify(gatewayd::runtime::make_executor(ioc));
  BOOST_TEST(!notify.enabled());
  BOOST_TEST(notify.watchdog_timeout().count() == 0);
  notify.ready("x");  // nothing to send to: must simply return
  gatewayd::gateway::watchdog dog(gatewayd::runtime::make_executor(ioc), notify);
  dog.start();
  BOOST_TEST(ioc.run_for(50ms) == 0u);  // no timer was armed
}
