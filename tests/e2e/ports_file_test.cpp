// `gatewayd --ports-file`: the file's content and atomic replacement, and the real daemon
// writing the ports it bound there (and removing the file when it exits).
#include <boost/test/unit_test.hpp>

#include <signal.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "gateway/ports_file.hpp"
#include "tests/support/binaries.hpp"
#include "tests/support/daemon_process.hpp"
#include "tests/support/gateway_fixture.hpp"
#include "tests/support/http_get.hpp"
#include "tests/support/test_peers.hpp"

using namespace gatewayd::test;
using namespace gatewayd::gateway;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_json_names_the_pid_and_both_listeners) {
  bound_ports ports;
  ports.pid = 42;
  ports.supplier = *gatewayd::net::parse_endpoint("127.0.0.1:7400");
  ports.metrics = gatewayd::net::parse_endpoint("[::1]:9464");
  BOOST_TEST(to_json(ports) ==
             "{\"pid\": 42, \"supplier\": \"127.0.0.1:7400\", \"metrics\": \"[::1]:9464\"}\n");
  ports.metrics.reset();
  BOOST_TEST(to_json(ports) ==
             "{\"pid\": 42, \"supplier\": \"127.0.0.1:7400\", \"metrics\": null}\n");
}

BOOST_AUTO_TEST_CASE(a_write_replaces_the_file_whole_and_leaves_no_temporary) {
  temp_dir dir;
  const auto path = dir.path() / "ports.json";
  BOOST_TEST(!write_atomically(path, "old\n"));
  BOOST_TEST(!write_atomically(path, "new\n"));
  BOOST_TEST(read_file(path) == "new\n");
  BOOST_TEST(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 1);
  const auto ec = write_atomically(dir.path() / "missing" / "ports.json", "x");
  BOOST_TEST((ec == std::errc::no_such_file_or_directory), ec.message());
}

BOOST_AUTO_TEST_CASE(gatewayd_writes_the_ports_it_bound_and_removes_the_file_at_exit) {
  test_consumer c;
  gateway_fixture gw(consumer_toml("c", c.endpoint()) + route_toml("a", {"c"}));
  const auto json = read_file(gw.ports_path());
  BOOST_TEST(json.rfind("{\"pid\": " + std::to_string(gw.daemon->pid()) + ", ", 0) == 0u, json);
  // The ports the kernel chose are the ones that answer.
  BOOST_TEST_REQUIRE(gw.supplier_port != 0);
  test_supplier s(gw.supplier_port);
  s.send_frame("a", "through the port from the file");
  BOOST_TEST(c.wait_for_count(1, 10s));
  BOOST_TEST(http_get(gw.metrics_port, "/metrics").status == 200);
  gw.daemon->signal(SIGTERM);
  BOOST_TEST_REQUIRE(gw.daemon->wait_exit(20s).has_value());
  BOOST_TEST(!fs::exists(gw.ports_path()));
}

BOOST_AUTO_TEST_CASE(metrics_disabled_is_null_in_the_file) {
  test_consumer c;
  gateway_fixture gw(consumer_toml("c", c.endpoint()) + route_toml("a", {"c"}), "", {}, false);
  BOOST_TEST(read_file(gw.ports_path()).find("\"metrics\": null}") != std::string::npos);
  BOOST_TEST(gw.metrics_port == 0);
}

BOOST_AUTO_TEST_CASE(a_ports_file_that_cannot_be_written_stops_the_start_with_the_reason) {
  temp_dir dir;
  dir.write("routes.toml", "[consumers.c]\nendpoint = \"127.0.0.1:9\"\n");
  const auto config = dir.write("gatewayd.toml",
                                "[gateway]\nsupplier_listen = \"127.0.0.1:0\"\n"
                                "routes_file = \"routes.toml\"\n[metrics]\nenabled = false\n");
  const auto bad = (dir.path() / "no" / "such" / "dir" / "ports.json").string();
  const auto r =
      run_command(gatewayd_binary(), {"--config", config.string(), "--ports-file", bad}, 30s);
  BOOST_TEST(r.exit_code == 1);
  // The operator's message is the behaviour here.
  BOOST_TEST(r.err.find("cannot write the ports file " + bad) != std::string::npos, r.err);
}
