// What an operator can put where the daemon reads its configuration, against the real daemon:
// a FIFO or an oversized file is refused by a reload at once, with the reason, and the daemon
// keeps its table, reloads the next good file and still stops on SIGTERM.
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "tests/support/gateway_fixture.hpp"
#include "tests/support/test_peers.hpp"

using namespace gatewayd::test;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_CASE(a_fifo_or_an_oversized_routes_file_fails_the_reload_at_once) {
  test_consumer c;
  const auto good = consumer_toml("c", c.endpoint()) + route_toml("x.>", {"c"});
  gateway_fixture gw(good);
  BOOST_TEST_REQUIRE(c.wait_for_connections(1, 5s));

  // A FIFO: reading it would wait for a writer that never comes, on the thread that reloads.
  std::filesystem::remove(gw.routes_path());
  BOOST_TEST_REQUIRE(::mkfifo(gw.routes_path().c_str(), 0600) == 0);
  gw.daemon->signal(SIGHUP);
  const auto fifo = gw.daemon->wait_for_log("not a regular file but a FIFO", 5s);
  BOOST_TEST_REQUIRE(fifo.has_value(), gw.daemon->log());
  BOOST_TEST(fifo->find(gw.routes_path() + ": ") != std::string::npos, *fifo);
  BOOST_TEST(gw.daemon->wait_for_log("reload (SIGHUP) failed with 1", 5s).has_value());

  // 17 MiB of valid TOML: refused by its size before it is read.
  std::filesystem::remove(gw.routes_path());
  {
    std::ofstream out(gw.routes_path() + ".tmp", std::ios::binary);
    out << good << '#' << std::string(17 << 20, 'x') << '\n';
  }
  std::filesystem::rename(gw.routes_path() + ".tmp", gw.routes_path());
  gw.daemon->signal(SIGHUP);
  const auto big = gw.daemon->wait_for_log("bytes a configuration file may have", 5s);
  BOOST_TEST_REQUIRE(big.has_value(), gw.daemon->log());
  BOOST_TEST(big->find(gw.routes_path() + ": file is ") != std::string::npos, *big);

  // The running table still routes, the next good file reloads, and SIGTERM stops it.
  test_supplier s(gw.supplier_port);
  s.send_frame("x.after", "1");
  BOOST_TEST(c.wait_for_count(1, 5s));
  gw.dir.write("routes.toml", good);
  gw.daemon->signal(SIGHUP);
  BOOST_TEST(gw.daemon->wait_for_log("routing table reloaded (SIGHUP)", 5s).has_value(),
             gw.daemon->log());
  gw.daemon->signal(SIGTERM);
  const auto status = gw.daemon->wait_exit(10s);
  BOOST_TEST_REQUIRE(status.has_value(), "still running 10 s after SIGTERM");
  BOOST_TEST(*status == 0);
}
