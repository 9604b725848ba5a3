#include <boost/test/unit_test.hpp>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "config/service_config.hpp"
#include "tests/support/daemon_process.hpp"

using namespace gatewayd::config;
using gatewayd::test::temp_dir;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

const std::string valid_routes =
    "[consumers.a]\nendpoint = \"127.0.0.1:7501\"\n"
    "[[routes]]\nmatch = \"x.>\"\nto = [\"a\"]\n";

service_load_result parse(const std::string& text) {
  return parse_service_config(text, "/etc/gatewayd/gatewayd.toml");
}

struct expected_error {
  std::uint32_t line;
  std::uint32_t column;
  std::string message;
};

void expect_errors(const std::string& text, const std::vector<expected_error>& want) {
  const auto result = parse(text);
  BOOST_TEST(!result.config.has_value());
  BOOST_TEST_REQUIRE(result.errors.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto& e = result.errors[i];
    BOOST_TEST_INFO("error " << i << ": " << e.to_string());
    BOOST_TEST(e.file == "/etc/gatewayd/gatewayd.toml");
    BOOST_TEST_INFO("error " << i << ": " << e.to_string());
    BOOST_TEST(e.line == want[i].line);
    BOOST_TEST_INFO("error " << i << ": " << e.to_string());
    BOOST_TEST(e.column == want[i].column);
    BOOST_TEST(e.message == want[i].message);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(values)

BOOST_AUTO_TEST_CASE(defaults) {
  const auto result = parse("[gateway]\nroutes_file = \"routes.toml\"\n");
  BOOST_TEST(result.errors.empty());
  BOOST_REQUIRE(result.config.has_value());
  const auto& c = *result.config;
  BOOST_TEST(c.config_file == fs::path{"/etc/gatewayd/gatewayd.toml"});
  BOOST_TEST(c.routes_file == fs::path{"/etc/gatewayd/routes.toml"});
  BOOST_TEST(c.supplier_listen.to_string() == "127.0.0.1:7400");
  BOOST_TEST(c.threads == 0u);
  BOOST_TEST(c.max_payload == 1048576u);
  BOOST_TEST(c.idle_timeout.count() == 60000);
  BOOST_TEST(c.max_supplier_connections == 10000u);
  BOOST_TEST(c.max_handshaking_connections == 256u);
  BOOST_TEST(c.drain_timeout.count() == 5000);
  BOOST_TEST(c.reconnect_initial.count() == 100);
  BOOST_TEST(c.reconnect_max.count() == 2000);
  BOOST_TEST(c.max_queued_bytes == 1073741824u);
  BOOST_TEST(c.max_partial_frame_bytes == 268435456u);
  BOOST_TEST(c.max_confirm_ledger_bytes == 268435456u);
  BOOST_TEST(c.allow.empty());
  BOOST_TEST((c.lame_duck.count() == 0 && !c.proxy_protocol && c.proxy_from == loopback_blocks()));
  BOOST_TEST(c.metrics_listen.to_string() == "127.0.0.1:9464");
  BOOST_TEST(c.metrics_enabled);
  BOOST_TEST((c.metrics_allow == loopback_blocks()));
  BOOST_TEST((c.log_level == gatewayd::log::level::info));
}

BOOST_AUTO_TEST_CASE(every_key) {
  const auto result = parse(R"([gateway]
supplier_listen = "[::1]:0"
threads = 4
max_payload = 4096
routes_file = "../routing/table.toml"
idle_timeout_ms = 0
max_supplier_connections = 12
max_handshaking_connections = 5
drain_timeout_ms = 0
lame_duck_ms = 2500
reconnect_initial_ms = 250
reconnect_max_ms = 250
max_queued_bytes = 0
max_confirm_ledger_bytes = 0
allow = ["10.0.0.0/8", "::1", "fd00::/8"]
proxy_protocol = true
proxy_from = ["10.1.0.7"]

[metrics]
listen = "0.0.0.0:9100"
enabled = false
allow = ["192.0.2.7", "10.20.0.0/16", "fd00::/8"]

[log]
level = "warning"
)");
  for (const auto& e : result.errors)
    BOOST_TEST_MESSAGE(e.to_string());
  BOOST_REQUIRE(result.config.has_value());
  const auto& c = *result.config;
  BOOST_TEST(c.supplier_listen.host == "::1");
  BOOST_TEST(c.supplier_listen.port == 0);
  BOOST_TEST(c.threads == 4u);
  BOOST_TEST(c.max_payload == 4096u);
  BOOST_TEST(c.routes_file == fs::path{"/etc/routing/table.toml"});
  BOOST_TEST(c.idle_timeout.count() == 0);
  BOOST_TEST(c.max_supplier_connections == 12u);
  BOOST_TEST(c.max_handshaking_connections == 5u);
  BOOST_TEST(c.drain_timeout.count() == 0);
  BOOST_TEST(c.reconnect_initial.count() == 250);
  BOOST_TEST(c.reconnect_max.count() == 250);
  BOOST_TEST(c.max_queued_bytes == 0u);
  BOOST_TEST(c.max_confirm_ledger_bytes == 0u);
  BOOST_REQUIRE(c.allow.size() == 3u);
  BOOST_TEST(c.allow[0].to_string() == "10.0.0.0/8");
  BOOST_TEST(c.allow[1].to_string() == "::1/128");
  BOOST_TEST(c.allow[2].to_string() == "fd00::/8");
  BOOST_TEST((c.lame_duck.count() == 2500 && c.proxy_protocol &&
              c.proxy_from == std::vector{*gatewayd::net::parse_cidr("10.1.0.7")}));
  BOOST_TEST(c.metrics_listen.to_string() == "0.0.0.0:9100");
  BOOST_TEST(!c.metrics_enabled);
  BOOST_REQUIRE(c.metrics_allow.size() == 3u);
  BOOST_TEST(c.metrics_allow[0].to_string() == "192.0.2.7/32");
  BOOST_TEST(c.metrics_allow[1].to_string() == "10.20.0.0/16");
  BOOST_TEST(c.metrics_allow[2].to_string() == "fd00::/8");
  BOOST_TEST((c.log_level == gatewayd::log::level::warning));
}

BOOST_AUTO_TEST_CASE(log_levels) {
  const std::pair<const char*, gatewayd::log::level> levels[] = {
      {"debug", gatewayd::log::level::debug},
      {"info", gatewayd::log::level::info},
      {"warning", gatewayd::log::level::warning},
      {"error", gatewayd::log::level::error}};
  for (const auto& [name, level] : levels) {
    const auto r =
        parse(std::string{"[gateway]\nroutes_file = \"r\"\n[log]\nlevel = \""} + name + "\"\n");
    BOOST_REQUIRE(r.config.has_value());
    BOOST_TEST((r.config->log_level == level));
  }
}

BOOST_AUTO_TEST_CASE(routes_file_relative_to_the_config_file) {
  temp_dir dir;
  const auto config =
      dir.write("conf/gatewayd.toml", "[gateway]\nroutes_file = \"sub/../routes.toml\"\n");
  const auto result = load_service_config(config);
  BOOST_REQUIRE(result.config.has_value());
  BOOST_TEST(result.config->routes_file == (dir.path() / "conf" / "routes.toml"));
  BOOST_TEST(result.config->routes_file.is_absolute());
  BOOST_TEST(result.config->config_file == config);

  // An absolute routes_file stays as written.
  const auto absolute =
      dir.write("abs.toml", "[gateway]\nroutes_file = \"/srv/x/../routes.toml\"\n");
  const auto abs_result = load_service_config(absolute);
  BOOST_REQUIRE(abs_result.config.has_value());
  BOOST_TEST(abs_result.config->routes_file == fs::path{"/srv/routes.toml"});
}

// Issue 46: spool_dir is relative to gatewayd.toml (`spool` beside it when absent), and --check
// names one gatewayd could not create or write, at the key.
BOOST_AUTO_TEST_CASE(spool_dir_is_resolved_and_checked) {
  temp_dir dir;
  const auto plain = dir.write("conf/gatewayd.toml", "[gateway]\nroutes_file = \"r.toml\"\n");
  const auto result = load_service_config(plain);
  BOOST_REQUIRE(result.config.has_value());
  BOOST_TEST(result.config->spool_dir == (dir.path() / "conf" / "spool"));

  const auto named =
      dir.write("named.toml", "[gateway]\nroutes_file = \"r.toml\"\nspool_dir = \"a/b/spool\"\n");
  const auto made = load_service_config(named);
  BOOST_REQUIRE(made.config.has_value());  // a/b does not exist yet: it can be created
  BOOST_TEST(made.config->spool_dir == (dir.path() / "a" / "b" / "spool"));

  // A file where the folder would be: not a folder.
  dir.write("file", "x");
  const auto blocked = dir.write(
      "blocked.toml", "[gateway]\nroutes_file = \"r.toml\"\nspool_dir = \"file/spool\"\n");
  const auto refused = load_service_config(blocked);
  BOOST_REQUIRE(refused.errors.size() == 1u);
  BOOST_TEST(refused.errors[0].line == 3);
  BOOST_TEST(refused.errors[0].message == "gateway.spool_dir: \"file/spool\": " +
                                              (dir.path() / "file").string() + " is not a folder");
}

BOOST_AUTO_TEST_CASE(relative_config_path_is_made_absolute) {
  temp_dir dir;
  dir.write("gatewayd.toml", "[gateway]\nroutes_file = \"routes.toml\"\n");
  const auto previous = fs::current_path();
  fs::current_path(dir.path());
  const auto result = load_service_config("gatewayd.toml");
  fs::current_path(previous);
  BOOST_REQUIRE(result.config.has_value());
  BOOST_TEST(result.config->config_file == dir.path() / "gatewayd.toml");
  BOOST_TEST(result.config->routes_file == dir.path() / "routes.toml");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(errors)

// The keys that chose a pattern to compare fail the load, whatever their value (the one
// gatewayd runs included), naming what replaced them; the rest of the file is still read.
BOOST_AUTO_TEST_CASE(the_removed_model_keys_name_what_replaced_them) {
  expect_errors(
      R"([gateway]
routes_file = "r"
concurrency = "leader-followers"
consumer_drain = "strand"
threads = 0.5
)",
      {{3, 15,
        "[gateway] concurrency was removed: gatewayd always runs Leader/Followers; the other "
        "models are in bench/model_harness (docs/benchmarks.md)"},
       {4, 18,
        "[gateway] consumer_drain was removed: gatewayd always drains each consumer on its own "
        "strand; the other models are in bench/model_harness (docs/benchmarks.md)"},
       {5, 11, "gateway.threads: expected an integer, got a floating-point number"}});
}

BOOST_AUTO_TEST_CASE(every_error_with_its_position) {
  expect_errors(
      R"(title = "gw"
[gateway]
supplier_listen = "localhost:7400"
threads = -1
max_payload = 0
routes_file = 5
idle_timeout_ms = 2147483648
max_supplier_connections = 0
concurrency = "thread-per-connection"
drain_timeout_ms = "5s"
reconnect_initial_ms = 0
max_queued_bytes = -1
allow = ["10.0.0.1/8", 7, "1.2.3.4/33", "nonsense"]
  threds = 2

[metrics]
listen = "127.0.0.1"
enabled = "yes"
port = 1
allow = ["127.0.0.1", "10.0.0.1/8"]

[log]
level = "verbose"

[logging]
)",
      {{1, 1, "title: unknown key (expected gateway, tls, metrics, log)"},
       {3, 19,
        "gateway.supplier_listen: \"localhost:7400\" is not a literal IPv4:port or "
        "[IPv6]:port address"},
       {4, 11, "gateway.threads: -1 is out of range (0..1024)"},
       {5, 15, "gateway.max_payload: 0 is out of range (1..268435456)"},
       {6, 15, "gateway.routes_file: expected a string, got an integer"},
       {7, 19, "gateway.idle_timeout_ms: 2147483648 is out of range (0..2147483647)"},
       {8, 28, "gateway.max_supplier_connections: 0 is out of range (1..1048576)"},
       {9, 15,
        "[gateway] concurrency was removed: gatewayd always runs Leader/Followers; the other "
        "models are in bench/model_harness (docs/benchmarks.md)"},
       {10, 20, "gateway.drain_timeout_ms: expected an integer, got a string"},
       {11, 24, "gateway.reconnect_initial_ms: 0 is out of range (1..2147483647)"},
       {12, 20, "gateway.max_queued_bytes: -1 is out of range (0..9223372036854775807)"},
       {13, 10,
        "gateway.allow[0]: \"10.0.0.1/8\": host bits are set after the /8 prefix (did "
        "you mean 10.0.0.0/8?)"},
       {13, 24, "gateway.allow[1]: expected a CIDR block (a string), got an integer"},
       {13, 27, "gateway.allow[2]: \"1.2.3.4/33\": prefix length must be 0..32"},
       {13, 41,
        "gateway.allow[3]: \"nonsense\": not an IPv4 or IPv6 address (write 10.0.0.0/8, "
        "fd00::/8 or a single address)"},
       {14, 3,
        "gateway.threds: unknown key (expected supplier_listen, threads, idle_poll_us, "
        "max_payload, "
        "routes_file, idle_timeout_ms, max_supplier_connections, max_handshaking_connections, "
        "drain_timeout_ms, spool_dir, spool_sync_ms, lame_duck_ms, reconnect_initial_ms, "
        "reconnect_max_ms, "
        "max_queued_bytes, max_partial_frame_bytes, allow, proxy_protocol, proxy_from, "
        "slow_consumer_ms, consumer_connect_timeout_ms, consumer_timeout_ms, "
        "max_unconfirmed_frames, confirm_timeout_ms, max_confirm_ledger_bytes)"},
       {17, 10,
        "metrics.listen: \"127.0.0.1\" is not a literal IPv4:port or [IPv6]:port "
        "address"},
       {18, 11, "metrics.enabled: expected a boolean (true or false), got a string"},
       {19, 1, "metrics.port: unknown key (expected listen, enabled, allow)"},
       {20, 23,
        "metrics.allow[1]: \"10.0.0.1/8\": host bits are set after the /8 prefix (did you "
        "mean 10.0.0.0/8?)"},
       {23, 9, "log.level: unknown level \"verbose\" (expected debug, info, warning or error)"},
       {25, 2, "logging: unknown key (expected gateway, tls, metrics, log)"}});
}

// An empty metrics.allow would mean nobody, or (read as gateway.allow is) everybody: neither is
// taken silently.
BOOST_AUTO_TEST_CASE(metrics_allow_may_not_be_empty) {
  expect_errors("[gateway]\nroutes_file = \"r\"\n[metrics]\nallow = []\n",
                {{4, 9,
                  "metrics.allow: empty; list the networks that may reach the metrics listener "
                  "(\"0.0.0.0/0\" admits every IPv4 client)"}});
}

BOOST_AUTO_TEST_CASE(missing_routes_file_points_at_gateway_table) {
  expect_errors("# comment\n\n[gateway]\nthreads = 2\n",
                {{3, 1, "gateway: missing required key \"routes_file\""}});
  expect_errors("[gateway]\nroutes_file = \"\"\n",
                {{2, 15, "gateway.routes_file: must not be empty"}});
}

BOOST_AUTO_TEST_CASE(missing_gateway_table_is_a_file_error) {
  const auto result = parse("[metrics]\nenabled = false\n");
  BOOST_REQUIRE(result.errors.size() == 1u);
  BOOST_TEST(result.errors[0].to_string() ==
             "/etc/gatewayd/gatewayd.toml: missing required table [gateway] (it names "
             "routes_file)");
  expect_errors("gateway = 1\n", {{1, 11, "gateway: expected a table, got an integer"}});
}

BOOST_AUTO_TEST_CASE(cross_checks) {
  expect_errors(
      "[gateway]\nroutes_file = \"r\"\nreconnect_initial_ms = 500\nreconnect_max_ms = 400\n",
      {{4, 20, "gateway.reconnect_max_ms: 400 is below reconnect_initial_ms (500)"}});
  expect_errors("[gateway]\nroutes_file = \"r\"\nreconnect_initial_ms = 60000\n",
                {{3, 24,
                  "gateway.reconnect_initial_ms: 60000 is above reconnect_max_ms (2000, its "
                  "default)"}});
  expect_errors("[gateway]\nroutes_file = \"r\"\nproxy_protocol = true\nproxy_from = []\n",
                {{4, 14, "gateway.proxy_from: empty, so no balancer may send the PROXY header"}});
  // An invalid value is reported once, not again by the cross-check.
  expect_errors(
      "[gateway]\nroutes_file = \"r\"\nreconnect_initial_ms = 500\nreconnect_max_ms = 0\n",
      {{4, 20, "gateway.reconnect_max_ms: 0 is out of range (1..2147483647)"}});
  expect_errors("[gateway]\nroutes_file = \"r\"\nmax_confirm_ledger_bytes = 4096\n",
                {{3, 28,
                  "gateway.max_confirm_ledger_bytes: 4096 is below 1048576 (1 MiB): every "
                  "confirm-mode supplier would wait on it; 0 = no bound"}});
  expect_errors("[gateway]\nroutes_file = \"r\"\nmax_payload = 4096\nmax_queued_bytes = 4095\n",
                {{4, 20,
                  "gateway.max_queued_bytes: 4095 is below max_payload (4096): the largest frame "
                  "could never be queued"}});
  expect_errors("[gateway]\nroutes_file = \"r\"\nmax_payload = 4096\nmax_partial_frame_bytes = 1\n",
                {{4, 27,
                  "gateway.max_partial_frame_bytes: 1 is below max_payload (4096): the largest "
                  "frame could never be received"}});
  expect_errors(
      "[gateway]\nroutes_file = \"r\"\nsupplier_listen = \"127.0.0.1:9000\"\n[metrics]\nlisten = "
      "\"127.0.0.1:9000\"\n",
      {{5, 10, "metrics.listen: 127.0.0.1:9000 is also gateway.supplier_listen"}});
  // Port 0 twice is fine (two different free ports), and so is a clash with metrics off.
  BOOST_TEST(parse("[gateway]\nroutes_file = \"r\"\nsupplier_listen = \"127.0.0.1:0\"\n[metrics]\n"
                   "listen = \"127.0.0.1:0\"\n")
                 .config.has_value());
  BOOST_TEST(
      parse("[gateway]\nroutes_file = \"r\"\nsupplier_listen = \"127.0.0.1:9000\"\n[metrics]\n"
            "listen = \"127.0.0.1:9000\"\nenabled = false\n")
          .config.has_value());
}

BOOST_AUTO_TEST_CASE(syntax_error) {
  expect_errors("[gateway\nroutes_file = \"r\"\n",
                {{1, 9, "Error while parsing table header: expected ']', saw '\\n'"}});
}

BOOST_AUTO_TEST_CASE(unreadable_file) {
  const auto result = load_service_config("/nonexistent/gatewayd.toml");
  BOOST_REQUIRE(result.errors.size() == 1u);
  BOOST_TEST(result.errors[0].to_string() ==
             "/nonexistent/gatewayd.toml: cannot open file: No such file or directory");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(full)

BOOST_AUTO_TEST_CASE(the_real_sample_files) {
  const auto result = load_full_config(GATEWAYD_SOURCE_DIR "/etc/gatewayd.toml");
  for (const auto& e : result.errors)
    BOOST_TEST_MESSAGE(e.to_string());
  BOOST_TEST(result.errors.empty());
  BOOST_REQUIRE(result.config.has_value());
  const auto& c = *result.config;
  BOOST_TEST(c.service.routes_file ==
             fs::path{GATEWAYD_SOURCE_DIR "/etc/routes.toml"}.lexically_normal());
  BOOST_TEST(c.service.supplier_listen.host == "127.0.0.1");
  BOOST_TEST(c.service.metrics_listen.host == "127.0.0.1");
  BOOST_TEST(c.routing.consumers.size() == 2u);
  BOOST_TEST(c.routing.routes.size() == 2u);
  // The sample states every default: loading it must give the same as an empty [gateway].
  auto defaults = parse_service_config("[gateway]\nroutes_file = \"routes.toml\"\n",
                                       GATEWAYD_SOURCE_DIR "/etc/gatewayd.toml");
  BOOST_REQUIRE(defaults.config.has_value());
  BOOST_TEST((defaults.config.value() == c.service));
}

BOOST_AUTO_TEST_CASE(errors_of_both_files) {
  temp_dir dir;
  const auto config =
      dir.write("gatewayd.toml", "[gateway]\nroutes_file = \"routes.toml\"\nthreads = -2\n");
  dir.write("routes.toml", "[consumers.a]\nendpoint = \"bad\"\n");
  const auto result = load_full_config(config);
  BOOST_TEST(!result.config.has_value());
  BOOST_REQUIRE(result.errors.size() == 2u);
  BOOST_TEST(result.errors[0].to_string() ==
             config.string() + ":3:11: gateway.threads: -2 is out of range (0..1024)");
  BOOST_TEST(result.errors[1].to_string() ==
             (dir.path() / "routes.toml").string() +
                 ":2:12: consumers.a.endpoint: \"bad\" is not a literal IPv4:port or [IPv6]:port "
                 "address");
}

BOOST_AUTO_TEST_CASE(valid_pair) {
  temp_dir dir;
  const auto config =
      dir.write("etc/gatewayd.toml", "[gateway]\nroutes_file = \"../routes/r.toml\"\n");
  dir.write("routes/r.toml", valid_routes);
  const auto result = load_full_config(config);
  BOOST_TEST(result.errors.empty());
  BOOST_REQUIRE(result.config.has_value());
  BOOST_TEST(result.config->routing.consumers.at(0).name == "a");
  BOOST_TEST(result.config->service.routes_file == dir.path() / "routes" / "r.toml");
}

BOOST_AUTO_TEST_CASE(missing_routes_file) {
  temp_dir dir;
  const auto config = dir.write("gatewayd.toml", "[gateway]\nroutes_file = \"nope.toml\"\n");
  const auto result = load_full_config(config);
  BOOST_REQUIRE(result.errors.size() == 1u);
  BOOST_TEST(result.errors[0].to_string() ==
             (dir.path() / "nope.toml").string() + ": cannot open file: No such file or directory");
}

BOOST_AUTO_TEST_CASE(broken_service_file_stops_there) {
  temp_dir dir;
  const auto config = dir.write("gatewayd.toml", "[gateway]\nroutes_file = \n");
  dir.write("routes.toml", "this is not toml");
  const auto result = load_full_config(config);
  BOOST_REQUIRE(result.errors.size() == 1u);
  BOOST_TEST(result.errors[0].file == config.string());
  BOOST_TEST(result.errors[0].line == 2u);
}

BOOST_AUTO_TEST_SUITE_END()

// [tls] file names may start with ${CREDENTIALS_DIRECTORY}/, where systemd's LoadCredential= puts
// the unit's copies; nothing else is expanded, and the prefix needs the variable.
BOOST_AUTO_TEST_SUITE(credentials_directory)

const std::string tls_in_credentials =
    "[gateway]\nroutes_file = \"r\"\n[tls]\n"
    "cert = \"${CREDENTIALS_DIRECTORY}/tls_gateway.crt\"\n"
    "key = \"${CREDENTIALS_DIRECTORY}/tls_gateway.key\"\n"
    "client_ca = \"tls/ca.crt\"\n";

BOOST_AUTO_TEST_CASE(the_prefix_becomes_the_directory) {
  credentials creds;
  creds.directory = "/run/credentials/gatewayd.service";
  const auto r = parse_service_config(tls_in_credentials, "/etc/gatewayd/gatewayd.toml", creds);
  for (const auto& e : r.errors)
    BOOST_TEST_MESSAGE(e.to_string());
  BOOST_REQUIRE(r.config.has_value());
  BOOST_TEST(r.config->tls_cert == fs::path{"/run/credentials/gatewayd.service/tls_gateway.crt"});
  BOOST_TEST(r.config->tls_key == fs::path{"/run/credentials/gatewayd.service/tls_gateway.key"});
  BOOST_TEST(r.config->tls_client_ca == fs::path{"/etc/gatewayd/tls/ca.crt"});  // as before
  BOOST_TEST(creds.holds(r.config->tls_key));
  BOOST_TEST(!creds.holds(r.config->tls_client_ca));
  BOOST_TEST(!creds.holds("/run/credentials/gatewayd.service2/tls_gateway.key"));
  BOOST_TEST(!creds.holds("/run/credentials/gatewayd.service"));
  creds.directory = "/run/credentials/gatewayd.service/";  // a trailing slash changes nothing
  BOOST_TEST(creds.holds(r.config->tls_key));
}

BOOST_AUTO_TEST_CASE(the_variable_comes_from_the_environment) {
  temp_dir dir;
  BOOST_REQUIRE(::setenv("CREDENTIALS_DIRECTORY", dir.path().c_str(), 1) == 0);
  const auto r = parse(tls_in_credentials);
  const auto unset = ::unsetenv("CREDENTIALS_DIRECTORY");
  BOOST_REQUIRE(unset == 0);
  BOOST_REQUIRE(r.config.has_value());
  BOOST_TEST(r.config->tls_key == dir.path() / "tls_gateway.key");
  const auto without = parse(tls_in_credentials);
  BOOST_TEST(!without.config.has_value());
}

BOOST_AUTO_TEST_CASE(unset_it_is_an_error_at_each_key_naming_it) {
  const auto r = parse_service_config(tls_in_credentials, "/etc/gatewayd/gatewayd.toml", {});
  BOOST_TEST(!r.config.has_value());
  BOOST_REQUIRE(r.errors.size() == 2u);
  BOOST_TEST(r.errors[0].to_string() ==
             "/etc/gatewayd/gatewayd.toml:4:8: tls.cert: "
             "\"${CREDENTIALS_DIRECTORY}/tls_gateway.crt\" names a systemd credential, but "
             "CREDENTIALS_DIRECTORY is not set: gatewayd is not running under a unit that passes "
             "it with LoadCredential= (docs/security.md)");
  BOOST_TEST(r.errors[1].to_string().find(":5:7: tls.key: \"${CREDENTIALS_DIRECTORY}/") !=
                 std::string::npos,
             r.errors[1].to_string());
}

BOOST_AUTO_TEST_CASE(only_that_variable_and_only_as_a_prefix) {
  credentials creds;
  creds.directory = "/run/credentials/gatewayd.service";
  const std::pair<std::string, std::string> bad[] = {
      {"${HOME}/gateway.key",
       "only a leading ${CREDENTIALS_DIRECTORY}/ is expanded; no other "
       "variable is"},
      {"tls/${CREDENTIALS_DIRECTORY}/gateway.key",
       "only a leading ${CREDENTIALS_DIRECTORY}/ is expanded; no other variable is"},
      {"${CREDENTIALS_DIRECTORY}/${X}", "only a leading ${CREDENTIALS_DIRECTORY}/ is expanded"},
      {"${CREDENTIALS_DIRECTORY}/", "names no file after ${CREDENTIALS_DIRECTORY}/"},
      {"${CREDENTIALS_DIRECTORY}",
       "only a leading ${CREDENTIALS_DIRECTORY}/ is expanded; no "
       "other variable is"},
      {"$CREDENTIALS_DIRECTORY/tls_gateway.key",
       "is not expanded: write ${CREDENTIALS_DIRECTORY}/, with the braces"},
  };
  for (const auto& [name, why] : bad) {
    const auto r = parse_service_config(
        "[gateway]\nroutes_file = \"r\"\n[tls]\ncert = \"g.crt\"\nkey = \"" + name + "\"\n",
        "/etc/gatewayd/gatewayd.toml", creds);
    BOOST_REQUIRE(r.errors.size() == 1u);
    BOOST_TEST(r.errors[0].message == "tls.key: \"" + name + "\" " + why);
  }
}

BOOST_AUTO_TEST_SUITE_END()
