// The notifier against a real unix datagram socket whose reader falls behind: no call waits,
// state messages arrive in the order they were said once the reader reads again, watchdog
// pings are dropped meanwhile; an abstract address; no NOTIFY_SOCKET, no effect.
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <asio.hpp>
#include <chrono>
#include <cstdlib>
#include <future>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gateway/systemd_notify.hpp"
#include "tests/support/daemon_process.hpp"
#include "tests/support/notify_listener.hpp"
#include "tests/support/test_peers.hpp"

using gatewayd::gateway::systemd_notify;
using gatewayd::test::eventually;
using gatewayd::test::notify_listener;
using gatewayd::test::temp_dir;
using namespace std::chrono_literals;

namespace {

// The environment systemd gives a service, for the notifier built in this scope.
struct notify_environment {
  explicit notify_environment(const std::string& socket, const char* watchdog_usec = nullptr,
                              const char* watchdog_pid = nullptr) {
    ::setenv("NOTIFY_SOCKET", socket.c_str(), 1);
    set("WATCHDOG_USEC", watchdog_usec);
    set("WATCHDOG_PID", watchdog_pid);
  }
  ~notify_environment() {
    ::unsetenv("NOTIFY_SOCKET");
    ::unsetenv("WATCHDOG_USEC");
    ::unsetenv("WATCHDOG_PID");
  }
  static void set(const char* name, const char* value) {
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
};

// An io_context run by one thread for the notifier's retry timer, until this goes.
struct event_loop {
  asio::io_context ioc;
  asio::executor_work_guard<asio::io_context::executor_type> work{ioc.get_executor()};
  std::thread thread{[this] { ioc.run(); }};
  ~event_loop() {
    work.reset();
    ioc.stop();
    thread.join();
  }
};

// The notifier's messages the reader got, fillers left out, until `want` of them or 5 s.
std::vector<std::string> read_messages(notify_listener& systemd, std::size_t want) {
  std::vector<std::string> got;
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (got.size() < want && std::chrono::steady_clock::now() < deadline) {
    const auto m = systemd.next(100ms);
    if (m && !notify_listener::is_filler(m->text)) got.push_back(m->text);
  }
  return got;
}

// Runs `said` on another thread: true when it returned within 5 s (a blocking send would not).
bool returns_at_once(const std::function<void()>& said) {
  auto done = std::async(std::launch::async, said);
  return done.wait_for(5s) == std::future_status::ready;
}

}  // namespace

BOOST_AUTO_TEST_CASE(state_messages_wait_in_order_for_a_full_socket_and_pings_are_dropped) {
  temp_dir dir;
  notify_listener systemd((dir.path() / "notify").string());
  notify_environment env(systemd.address());
  event_loop loop;
  systemd_notify notify(gatewayd::runtime::make_executor(loop.ioc));
  BOOST_TEST_REQUIRE(notify.enabled());
  BOOST_TEST_REQUIRE(systemd.fill());  // PID 1 busy: its queue is full

  const bool returned = returns_at_once([&] {
    notify.ready("started");
    notify.watchdog();
    notify.reloading("reload 1");
    notify.ready("reloaded 1");
    notify.watchdog();
    notify.stopping("draining");
  });
  if (!returned) {
    while (systemd.next(100ms)) {
    }  // let the blocked thread go before failing
  }
  BOOST_TEST_REQUIRE(returned, "a notification waited for the reader");
  BOOST_TEST(notify.pending() == 4u);
  BOOST_TEST(notify.watchdog_dropped() == 2u);

  // The reader catches up: the retries deliver all four, in order, and no ping.
  const auto got = read_messages(systemd, 4);
  BOOST_TEST_REQUIRE(got.size() == 4u);
  BOOST_TEST(got[0] == "READY=1\nSTATUS=started");
  BOOST_TEST(notify_listener::has_line(got[1], "RELOADING=1"));
  BOOST_TEST(notify_listener::value_of(got[1], "STATUS").value_or("") == "reload 1");
  BOOST_TEST(got[2] == "READY=1\nSTATUS=reloaded 1");
  BOOST_TEST(got[3] == "STOPPING=1\nSTATUS=draining");
  BOOST_TEST(eventually([&] { return notify.pending() == 0; }, 5s));
  // With room again, a ping goes at once.
  notify.watchdog();
  BOOST_TEST(read_messages(systemd, 1) == std::vector<std::string>{"WATCHDOG=1"},
             boost::test_tools::per_element());
}

// A message said while others wait goes behind them, even if the socket has room by then.
BOOST_AUTO_TEST_CASE(a_new_message_never_overtakes_one_waiting) {
  temp_dir dir;
  notify_listener systemd((dir.path() / "notify").string());
  notify_environment env(systemd.address());
  asio::io_context ioc;  // not run: no retry happens unless the test says so
  systemd_notify notify(gatewayd::runtime::make_executor(ioc));
  BOOST_TEST_REQUIRE(systemd.fill());
  notify.reloading("first");
  BOOST_TEST(notify.pending() == 1u);
  while (const auto m = systemd.next(0ms)) {
  }  // room again, but the retry has not run
  notify.ready("second");
  const auto got = read_messages(systemd, 2);
  BOOST_TEST_REQUIRE(got.size() == 2u);
  BOOST_TEST(notify_listener::has_line(got[0], "RELOADING=1"));
  BOOST_TEST(got[1] == "READY=1\nSTATUS=second");
  BOOST_TEST(notify.pending() == 0u);
}

// At the end of a stop nothing may keep the io_context alive: stop() gives up what waits.
BOOST_AUTO_TEST_CASE(stop_gives_up_what_waits_and_leaves_the_event_loop_no_work) {
  temp_dir dir;
  notify_listener systemd((dir.path() / "notify").string());
  notify_environment env(systemd.address());
  asio::io_context ioc;
  systemd_notify notify(gatewayd::runtime::make_executor(ioc));
  BOOST_TEST_REQUIRE(systemd.fill());
  notify.stopping("draining");
  BOOST_TEST(notify.pending() == 1u);
  BOOST_TEST(ioc.run_for(3 * systemd_notify::retry_period) >= 1u);  // it retries meanwhile
  BOOST_TEST(notify.pending() == 1u);
  notify.stop();
  BOOST_TEST(notify.pending() == 0u);
  auto ran = std::async(std::launch::async, [&] { return ioc.run(); });
  BOOST_TEST((ran.wait_for(5s) == std::future_status::ready), "the retry kept the loop alive");
  // After the stop a message is tried once and never kept.
  notify.ready("late");
  BOOST_TEST(notify.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(an_abstract_notify_socket) {
  std::random_device rd;
  notify_listener systemd("@gatewayd-systemd-notify-test-" + std::to_string(::getpid()) + "-" +
                          std::to_string(rd()));
  notify_environment env(systemd.address());
  asio::io_context ioc;
  systemd_notify notify(gatewayd::runtime::make_executor(ioc));
  BOOST_TEST_REQUIRE(notify.enabled());
  notify.ready("abstract");
  BOOST_TEST(read_messages(systemd, 1) == std::vector<std::string>{"READY=1\nSTATUS=abstract"},
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(no_notify_socket_no_effect) {
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("WATCHDOG_USEC");
  asio::io_context ioc;
  systemd_notify notify(gatewayd::runtime::make_executor(ioc));
  BOOST_TEST(!notify.enabled());
  notify.ready("x");
  notify.reloading("x");
  notify.stopping("x");
  notify.watchdog();
  BOOST_TEST(notify.pending() == 0u);
  BOOST_TEST(notify.watchdog_dropped() == 0u);
  BOOST_TEST(ioc.run_for(50ms) == 0u);  // nothing was armed
}

// sd_watchdog_enabled(3)'s rules: WATCHDOG_PID, when set, must name this process.
BOOST_AUTO_TEST_CASE(the_watchdog_timeout_is_ours_only_when_watchdog_pid_says_so) {
  asio::io_context ioc;
  const auto me = std::to_string(::getpid());
  {
    notify_environment env("/nonexistent", "2000000", me.c_str());
    BOOST_TEST(systemd_notify(gatewayd::runtime::make_executor(ioc)).watchdog_timeout() ==
               std::chrono::microseconds(2000000));
  }
  {
    notify_environment env("/nonexistent", "2000000");
    BOOST_TEST(systemd_notify(gatewayd::runtime::make_executor(ioc)).watchdog_timeout() ==
               std::chrono::microseconds(2000000));
  }
  {
    const auto other = std::to_string(::getpid() + 1);
    notify_environment env("/nonexistent", "2000000", other.c_str());
    BOOST_TEST(systemd_notify(gatewayd::runtime::make_executor(ioc)).watchdog_timeout().count() ==
               0);
  }
  for (const char* bad : {"", "0", "-5", "12abc", "abc"}) {
    notify_environment env("/nonexistent", bad);
    BOOST_TEST(
        systemd_notify(gatewayd::runtime::make_executor(ioc)).watchdog_timeout().count() == 0,
        "WATCHDOG_USEC=" << bad);
  }
}
