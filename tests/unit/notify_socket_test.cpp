// The notify socket against real unix datagram sockets: path and abstract addresses, a full
// receiver refused at once instead of waited for, addresses it cannot use.
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <future>
#include <random>
#include <string>

#include "gateway/notify_socket.hpp"
#include "tests/support/daemon_process.hpp"
#include "tests/support/notify_listener.hpp"

using gatewayd::gateway::notify_socket;
using gatewayd::test::notify_listener;
using gatewayd::test::temp_dir;
using namespace std::chrono_literals;

namespace {

std::string abstract_name() {
  std::random_device rd;
  return "@gatewayd-notify-socket-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_path_address_gets_each_message_as_one_datagram) {
  temp_dir dir;
  notify_listener systemd((dir.path() / "notify").string());
  const notify_socket s(systemd.address());
  BOOST_TEST_REQUIRE(s.is_open(), s.problem());
  BOOST_TEST((s.send("READY=1\nSTATUS=one").what == notify_socket::outcome::sent));
  BOOST_TEST((s.send("WATCHDOG=1").what == notify_socket::outcome::sent));
  const auto first = systemd.next(5s);
  const auto second = systemd.next(5s);
  BOOST_TEST_REQUIRE((first && second));
  BOOST_TEST(first->text == "READY=1\nSTATUS=one");
  BOOST_TEST(second->text == "WATCHDOG=1");
}

BOOST_AUTO_TEST_CASE(an_abstract_address_starts_with_an_at_sign) {
  notify_listener systemd(abstract_name());
  const notify_socket s(systemd.address());
  BOOST_TEST_REQUIRE(s.is_open(), s.problem());
  BOOST_TEST((s.send("READY=1").what == notify_socket::outcome::sent));
  const auto m = systemd.next(5s);
  BOOST_TEST_REQUIRE(m.has_value());
  BOOST_TEST(m->text == "READY=1");
}

// What sd_notify(3) would wait for in unix_wait_for_peer: the send must come back at once.
BOOST_AUTO_TEST_CASE(a_full_receiver_is_reported_not_waited_for) {
  temp_dir dir;
  notify_listener systemd((dir.path() / "notify").string());
  BOOST_TEST_REQUIRE(systemd.fill());
  const notify_socket s(systemd.address());
  auto sent = std::async(std::launch::async, [&] { return s.send("STOPPING=1"); });
  BOOST_TEST_REQUIRE((sent.wait_for(5s) == std::future_status::ready),
                     "the send waited for the reader");
  const auto r = sent.get();
  BOOST_TEST((r.what == notify_socket::outcome::full));
  // One datagram read makes room for one more.
  BOOST_TEST_REQUIRE(systemd.next(5s).has_value());
  BOOST_TEST((s.send("STOPPING=1").what == notify_socket::outcome::sent));
}

BOOST_AUTO_TEST_CASE(no_reader_is_a_failure_with_its_errno) {
  temp_dir dir;
  const notify_socket s((dir.path() / "nobody").string());
  BOOST_TEST_REQUIRE(s.is_open());
  const auto r = s.send("READY=1");
  BOOST_TEST((r.what == notify_socket::outcome::failed));
  BOOST_TEST((r.error == ENOENT || r.error == ECONNREFUSED), r.error);
}

BOOST_AUTO_TEST_CASE(addresses_it_cannot_use_leave_it_closed_with_the_reason) {
  const notify_socket unset("");
  BOOST_TEST(!unset.is_open());
  BOOST_TEST(unset.problem().empty());  // not run by systemd: nothing to say
  BOOST_TEST((unset.send("READY=1").what == notify_socket::outcome::failed));

  const notify_socket relative("run/notify");
  BOOST_TEST(!relative.is_open());
  BOOST_TEST(relative.problem().find("neither an absolute path") != std::string::npos,
             relative.problem());

  const notify_socket too_long("/" + std::string(200, 'x'));
  BOOST_TEST(!too_long.is_open());
  BOOST_TEST(too_long.problem().find("longer than") != std::string::npos, too_long.problem());
}
