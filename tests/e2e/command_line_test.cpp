#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/command_line.hpp"
#include "tests/support/binaries.hpp"
#include "tests/support/tls_peers.hpp"

extern char** environ;

using namespace gatewayd::gateway;
using gatewayd::test::gatewayd_binary;
namespace fs = std::filesystem;
using mode = command_line::mode;

namespace {

command_line_result parse(std::vector<std::string_view> args) {
  return parse_command_line(args);
}

struct run_result {
  int exit_code = -1;  // -1: did not exit in time (and was killed)
  std::string out;
  std::string err;
};

// Runs the real gatewayd with `args`, capturing stdout and stderr, for at most `timeout`;
// `env` ("NAME=value") is added to this process's environment.
run_result run_gatewayd(const std::vector<std::string>& args,
                        std::chrono::milliseconds timeout = std::chrono::seconds(10),
                        const std::vector<std::string>& env = {}) {
  int out_pipe[2];
  int err_pipe[2];
  BOOST_REQUIRE(::pipe2(out_pipe, O_CLOEXEC) == 0);
  BOOST_REQUIRE(::pipe2(err_pipe, O_CLOEXEC) == 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  std::vector<std::string> argv_storage{gatewayd_binary()};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_storage(env);
  std::vector<char*> envp;
  for (char** e = environ; *e; ++e)
    envp.push_back(*e);
  for (auto& e : env_storage)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int spawned =
      ::posix_spawn(&pid, gatewayd_binary().c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  BOOST_REQUIRE_MESSAGE(spawned == 0, "cannot start " << gatewayd_binary());

  run_result result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_count = 2;
  while (open_count > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || ::poll(fds, 2, static_cast<int>(left.count())) <= 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      const auto n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(n));
      } else {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_count;
      }
    }
  }
  for (auto& fd : fds) {
    if (fd.fd >= 0) ::close(fd.fd);
  }
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);  // the child we started, by its pid
      ::waitpid(pid, &status, 0);
      return result;
    }
    ::usleep(1000);
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(parsing)

BOOST_AUTO_TEST_CASE(run_with_config) {
  const auto r = parse({"--config", "/etc/gatewayd/gatewayd.toml"});
  BOOST_REQUIRE(r.line.has_value());
  BOOST_TEST((r.line->what == mode::run));
  BOOST_TEST(r.line->config == fs::path{"/etc/gatewayd/gatewayd.toml"});
  BOOST_TEST(r.error.empty());
}

BOOST_AUTO_TEST_CASE(config_with_equals_sign) {
  const auto r = parse({"--config=gw.toml"});
  BOOST_REQUIRE(r.line.has_value());
  BOOST_TEST(r.line->config == fs::path{"gw.toml"});
}

BOOST_AUTO_TEST_CASE(check_in_either_order) {
  for (const auto& args : {std::vector<std::string_view>{"--check", "--config", "x.toml"},
                           std::vector<std::string_view>{"--config", "x.toml", "--check"}}) {
    const auto r = parse(args);
    BOOST_REQUIRE(r.line.has_value());
    BOOST_TEST((r.line->what == mode::check));
    BOOST_TEST(r.line->config == fs::path{"x.toml"});
  }
}

BOOST_AUTO_TEST_CASE(ports_file_with_a_space_or_an_equals_sign) {
  const auto r = parse({"--config", "x.toml", "--ports-file", "/run/gw/ports.json"});
  BOOST_REQUIRE(r.line.has_value());
  BOOST_TEST((r.line->what == mode::run));
  BOOST_TEST(r.line->ports_file == fs::path{"/run/gw/ports.json"});
  const auto e = parse({"--ports-file=p.json", "--config=x.toml"});
  BOOST_REQUIRE(e.line.has_value());
  BOOST_TEST(e.line->ports_file == fs::path{"p.json"});
  BOOST_TEST(parse({"--config", "x.toml"}).line->ports_file.empty());
}

BOOST_AUTO_TEST_CASE(version_and_help_win) {
  BOOST_TEST((parse({"--version"}).line->what == mode::version));
  BOOST_TEST((parse({"--config", "x", "--version"}).line->what == mode::version));
  BOOST_TEST((parse({"--help"}).line->what == mode::help));
  BOOST_TEST((parse({"-h"}).line->what == mode::help));
  BOOST_TEST((parse({"--version", "--help"}).line->what == mode::help));
}

BOOST_AUTO_TEST_CASE(bad_arguments) {
  const std::pair<std::vector<std::string_view>, std::string> cases[] = {
      {{}, "--config PATH is required"},
      {{"--check"}, "--config PATH is required"},
      {{"--config"}, "--config needs a file path"},
      {{"--config="}, "--config needs a file path"},
      {{"--config", ""}, "--config needs a file path"},
      {{"--config", "a", "--config", "b"}, "--config given more than once"},
      {{"--verbose"}, "unknown option '--verbose'"},
      {{"-c", "x"}, "unknown option '-c'"},
      {{"--config", "a", "b"}, "unexpected argument 'b'"},
      {{"--config", "a", "--ports-file"}, "--ports-file needs a file path"},
      {{"--config", "a", "--ports-file="}, "--ports-file needs a file path"},
      {{"--config", "a", "--ports-file", "p", "--ports-file", "q"},
       "--ports-file given more than once"},
      {{"--check", "--config", "a", "--ports-file", "p"},
       "--ports-file is for running, not with --check"},
  };
  for (const auto& [args, error] : cases) {
    const auto r = parse(args);
    BOOST_TEST(!r.line.has_value());
    BOOST_TEST(r.error == error);
  }
}

// The unit's TimeoutStopSec reaches --check as --stop-timeout (systemd exports no timeout to
// the commands it runs): seconds, or infinity for none.
BOOST_AUTO_TEST_CASE(check_takes_the_units_stop_timeout) {
  auto r = parse({"--check", "--stop-timeout", "30", "--config", "x.toml"});
  BOOST_REQUIRE(r.line.has_value());
  BOOST_TEST((r.line->stop_timeout == std::optional<std::chrono::seconds>(30)));
  r = parse({"--check", "--config", "x.toml", "--stop-timeout=infinity"});
  BOOST_REQUIRE(r.line.has_value());
  BOOST_TEST(!r.line->stop_timeout.has_value());
  r = parse({"--check", "--config", "x.toml"});
  BOOST_REQUIRE(r.line.has_value());
  BOOST_TEST(!r.line->stop_timeout.has_value());

  const std::string needs =
      "--stop-timeout needs the unit's TimeoutStopSec: a whole number of seconds, or infinity";
  const std::pair<std::vector<std::string_view>, std::string> bad[] = {
      {{"--check", "--config", "x", "--stop-timeout"}, needs},
      {{"--check", "--config", "x", "--stop-timeout", ""}, needs},  // ${VAR} of an unset VAR
      {{"--check", "--config", "x", "--stop-timeout=0"}, needs},
      {{"--check", "--config", "x", "--stop-timeout", "30s"}, needs},
      {{"--check", "--config", "x", "--stop-timeout", "-5"}, needs},
      {{"--check", "--config", "x", "--stop-timeout", "99999999999999999999"}, needs},
      {{"--check", "--config", "x", "--stop-timeout=1", "--stop-timeout=2"},
       "--stop-timeout given more than once"},
      {{"--config", "x", "--stop-timeout", "30"}, "--stop-timeout is only used with --check"},
  };
  for (const auto& [args, error] : bad) {
    const auto b = parse(args);
    BOOST_TEST(!b.line.has_value());
    BOOST_TEST(b.error == error);
  }
}

BOOST_AUTO_TEST_CASE(skip_credentials_goes_with_check) {
  auto r = parse({"--check", "--skip-credentials", "--config", "x.toml"});
  BOOST_REQUIRE(r.line.has_value());
  BOOST_TEST(r.line->skip_credentials);
  r = parse({"--check", "--config", "x.toml"});
  BOOST_REQUIRE(r.line.has_value());
  BOOST_TEST(!r.line->skip_credentials);
  r = parse({"--skip-credentials", "--config", "x.toml"});
  BOOST_TEST(!r.line.has_value());
  BOOST_TEST(r.error == "--skip-credentials is only used with --check");
}

BOOST_AUTO_TEST_CASE(argv_form_skips_the_program_name) {
  const char* argv[] = {"gatewayd", "--check", "--config", "c.toml", nullptr};
  const auto r = parse_command_line(4, argv);
  BOOST_REQUIRE(r.line.has_value());
  BOOST_TEST((r.line->what == mode::check));
  BOOST_TEST(r.line->config == fs::path{"c.toml"});
}

BOOST_AUTO_TEST_CASE(usage_names_every_mode) {
  const auto text = usage("gatewayd");
  for (const char* s :
       {"--config PATH", "--check --config PATH", "--version", "--help", "--ports-file FILE"}) {
    BOOST_TEST(text.find(s) != std::string::npos);
  }
}

BOOST_AUTO_TEST_SUITE_END()

// The real binary: what an operator (and systemd's ExecStartPre) sees.
BOOST_AUTO_TEST_SUITE(binary)

BOOST_AUTO_TEST_CASE(check_accepts_the_sample_config) {
  const auto r = run_gatewayd({"--check", "--config", GATEWAYD_SOURCE_DIR "/etc/gatewayd.toml"});
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.out == "configuration OK: 2 consumers, 2 routes\n");
  BOOST_TEST(r.err.empty());
}

BOOST_AUTO_TEST_CASE(check_reports_every_error_and_fails) {
  char pattern[] = "/tmp/command_line_test.XXXXXX";
  BOOST_REQUIRE(::mkdtemp(pattern) != nullptr);
  const fs::path dir{pattern};
  std::ofstream{dir / "gatewayd.toml"}
      << "[gateway]\nroutes_file = \"routes.toml\"\nthreads = \"x\"\n";
  std::ofstream{dir / "routes.toml"} << "[consumers.a]\nendpoint = \"127.0.0.1:1\"\n"
                                        "[[routes]]\nmatch = \"a.>.b\"\nto = [\"b\"]\n";
  const auto r = run_gatewayd({"--check", "--config", (dir / "gatewayd.toml").string()});
  fs::remove_all(dir);
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(r.out.empty());
  const std::string config = (dir / "gatewayd.toml").string();
  const std::string routes = (dir / "routes.toml").string();
  BOOST_TEST(r.err == config + ":3:11: gateway.threads: expected an integer, got a string\n" +
                          routes +
                          ":4:9: routes[0].match: invalid pattern \"a.>.b\": '>' is only allowed "
                          "as the last token at character 3\n" +
                          routes + ":5:7: routes[0].to[0]: unknown consumer \"b\"\n");
}

// A file from before the concurrency models left the product: --check fails and says what
// replaced the key, even when it names the model gatewayd runs.
BOOST_AUTO_TEST_CASE(check_fails_on_a_removed_model_key) {
  char pattern[] = "/tmp/command_line_test.XXXXXX";
  BOOST_REQUIRE(::mkdtemp(pattern) != nullptr);
  const fs::path dir{pattern};
  std::ofstream{dir / "gatewayd.toml"}
      << "[gateway]\nroutes_file = \"routes.toml\"\nconcurrency = \"leader-followers\"\n";
  std::ofstream{dir / "routes.toml"} << "[consumers.a]\nendpoint = \"127.0.0.1:1\"\n";
  const auto r = run_gatewayd({"--check", "--config", (dir / "gatewayd.toml").string()});
  fs::remove_all(dir);
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(r.out.empty());
  BOOST_TEST(r.err == (dir / "gatewayd.toml").string() +
                          ":3:15: [gateway] concurrency was removed: gatewayd always runs "
                          "Leader/Followers; the other models are in bench/model_harness "
                          "(docs/benchmarks.md)\n");
}

BOOST_AUTO_TEST_CASE(check_of_a_missing_file) {
  const auto r = run_gatewayd({"--check", "--config", "/nonexistent/gatewayd.toml"});
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(r.err == "/nonexistent/gatewayd.toml: cannot open file: No such file or directory\n");
}

// A FIFO where the routes file should be must not hang `--check` (nor ExecStartPre with it).
BOOST_AUTO_TEST_CASE(check_refuses_a_fifo_without_blocking) {
  char pattern[] = "/tmp/command_line_test.XXXXXX";
  BOOST_REQUIRE(::mkdtemp(pattern) != nullptr);
  const fs::path dir{pattern};
  std::ofstream{dir / "gatewayd.toml"} << "[gateway]\nroutes_file = \"routes.toml\"\n";
  BOOST_REQUIRE(::mkfifo((dir / "routes.toml").c_str(), 0600) == 0);
  const auto r = run_gatewayd({"--check", "--config", (dir / "gatewayd.toml").string()},
                              std::chrono::seconds(5));
  fs::remove_all(dir);
  BOOST_TEST(r.exit_code == 1, "exit " << r.exit_code << " (-1: still blocked after 5 s)");
  BOOST_TEST(r.err == (dir / "routes.toml").string() +
                          ": not a regular file but a FIFO; refusing to read it\n");
}

// systemd kills the daemon TimeoutStopSec after SIGTERM: a drain that cannot end (with 2 s to
// exit) before then is refused by the unit's ExecStartPre and ExecReload check.
BOOST_AUTO_TEST_CASE(check_refuses_a_drain_that_the_stop_timeout_would_cut_short) {
  char pattern[] = "/tmp/command_line_test.XXXXXX";
  BOOST_REQUIRE(::mkdtemp(pattern) != nullptr);
  const fs::path dir{pattern};
  const std::string config = (dir / "gatewayd.toml").string();
  std::ofstream{config} << "[gateway]\nroutes_file = \"routes.toml\"\ndrain_timeout_ms = 28001\n";
  std::ofstream{dir / "routes.toml"} << "";
  const auto refused = run_gatewayd({"--check", "--stop-timeout", "30", "--config", config});
  const auto fits = run_gatewayd({"--check", "--stop-timeout", "31", "--config", config});
  const auto unbounded =
      run_gatewayd({"--check", "--stop-timeout", "infinity", "--config", config});
  // A lame duck comes before the drain: it counts too.
  std::ofstream{config} << "[gateway]\nroutes_file = \"routes.toml\"\nlame_duck_ms = 27001\n"
                           "drain_timeout_ms = 1000\n";
  const auto lame = run_gatewayd({"--check", "--stop-timeout", "30", "--config", config});
  fs::remove_all(dir);
  BOOST_TEST(refused.exit_code == 1);
  BOOST_TEST(refused.out.empty());
  BOOST_TEST(refused.err == config +
                                ": gateway.drain_timeout_ms = 28001 does not leave 2 s of the "
                                "unit's TimeoutStopSec=30 to exit in: systemd would kill gatewayd "
                                "in the middle of its drain; lower drain_timeout_ms, or raise "
                                "TimeoutStopSec and GATEWAYD_TIMEOUT_STOP_SEC in a drop-in\n");
  BOOST_TEST(fits.exit_code == 0, fits.err);
  BOOST_TEST(unbounded.exit_code == 0, unbounded.err);
  BOOST_TEST(lame.err.find(": gateway.lame_duck_ms + drain_timeout_ms = 27001 + 1000 does not "
                           "leave 2 s") != std::string::npos,
             lame.err);
}

// A private key its group or others can read is refused (exit 1; the daemon does not start),
// at its `key` line, naming the file, its mode and the fix; the same file at 0600 is not. With
// allow_readable_key = true it is let through and warned of. Real files, real modes, the [tls]
// key and a consumer's client key alike.
BOOST_AUTO_TEST_CASE(a_key_others_can_read_is_refused_unless_allowed) {
  using gatewayd::test::pki;
  pki p;
  const std::string config = p.at("gatewayd.toml").string();
  const std::string routes = p.at("routes.toml").string();
  const std::string tls =
      "[gateway]\nroutes_file = \"routes.toml\"\n[tls]\ncert = \"gateway.crt\"\n"
      "key = \"gateway.key\"\n";
  const auto consumer = [&](const std::string& extra) {
    std::ofstream{routes} << "[consumers.billing]\nendpoint = \"127.0.0.1:7501\"\n"
                             "tls = { ca = \"ca.crt\", cert = \"orders.crt\", key = \"orders.key\""
                          << extra << " }\n";
  };
  std::ofstream{config} << tls;
  consumer("");
  BOOST_REQUIRE(::chmod(p.at("gateway.key").c_str(), 0600) == 0);
  BOOST_REQUIRE(::chmod(p.at("orders.key").c_str(), 0600) == 0);
  const auto owner_only = run_gatewayd({"--check", "--config", config});
  BOOST_TEST(owner_only.exit_code == 0, owner_only.err);
  BOOST_TEST(owner_only.err.empty(), owner_only.err);

  BOOST_REQUIRE(::chmod(p.at("gateway.key").c_str(), 0644) == 0);
  BOOST_REQUIRE(::chmod(p.at("orders.key").c_str(), 0640) == 0);
  const auto open = run_gatewayd({"--check", "--config", config});
  BOOST_TEST(open.exit_code == 1, open.err);
  BOOST_TEST(open.out.empty(), open.out);
  const std::string key = p.at("gateway.key").string();
  const std::string refused = config + ":5:7: tls.key: the private key " + key +
                              " is open to its group and others (mode 0644); let only its owner "
                              "read it: chmod 600 " +
                              key + ", owned by the user gatewayd runs as (chown); under systemd";
  BOOST_TEST(open.err.find(refused) == 0u, open.err);
  BOOST_TEST(open.err.find("LoadCredential=") != std::string::npos, open.err);
  BOOST_TEST(open.err.find(routes + ":3:") != std::string::npos, open.err);
  BOOST_TEST(
      open.err.find("consumers.billing.tls.key: the private key " + p.at("orders.key").string() +
                    " is open to its group (mode 0640)") != std::string::npos,
      open.err);
  // The daemon refuses to start with it, saying the same.
  const auto started = run_gatewayd({"--config", config});
  BOOST_TEST(started.exit_code == 1, started.err);
  BOOST_TEST(
      started.err.find("tls.key: the private key " + key + " is open to") != std::string::npos,
      started.err);

  // Access managed otherwise: said at every check and start, no longer refused.
  std::ofstream{config} << tls << "allow_readable_key = true\n";
  consumer(", allow_readable_key = true");
  const auto allowed = run_gatewayd({"--check", "--config", config});
  BOOST_TEST(allowed.exit_code == 0, allowed.err);
  BOOST_TEST(allowed.err.find(config +
                              ": warning: tls.key: allowed by allow_readable_key = true: "
                              "the private key " +
                              key + " is open to its group and others (mode 0644)") == 0u,
             allowed.err);
  BOOST_TEST(allowed.err.find(routes +
                              ":3:7: warning: consumers.billing.tls.key: allowed by "
                              "allow_readable_key = true: the private key " +
                              p.at("orders.key").string() + " is open to its group (mode 0640)") !=
                 std::string::npos,
             allowed.err);
}

namespace {

// A gatewayd.toml whose [tls] pair is named under ${CREDENTIALS_DIRECTORY}, and that directory
// (p's "creds", holding copies of the pair) as the environment entry that names it.
std::pair<std::string, std::string> credentials_config(const gatewayd::test::pki& p) {
  const std::string config = p.at("gatewayd.toml").string();
  std::ofstream{config} << "[gateway]\nroutes_file = \"routes.toml\"\n[tls]\n"
                           "cert = \"${CREDENTIALS_DIRECTORY}/tls_gateway.crt\"\n"
                           "key = \"${CREDENTIALS_DIRECTORY}/tls_gateway.key\"\n";
  std::ofstream{p.at("routes.toml")} << "";
  fs::create_directory(p.at("creds"));
  fs::copy_file(p.at("gateway.crt"), p.at("creds/tls_gateway.crt"));
  fs::copy_file(p.at("gateway.key"), p.at("creds/tls_gateway.key"));
  return {config, "CREDENTIALS_DIRECTORY=" + p.at("creds").string()};
}

}  // namespace

// systemd's credentials are the service's own copies, 0400 (0440 in some versions: the group is
// the service's own, and only its user may enter the directory): a group bit there is no
// exposure and is accepted; an "other" bit still is refused.
BOOST_AUTO_TEST_CASE(a_credentials_key_may_be_group_readable_not_world_readable) {
  using gatewayd::test::pki;
  pki p;
  const auto [config, creds] = credentials_config(p);
  for (const ::mode_t mode : {0400, 0440}) {
    BOOST_REQUIRE(::chmod(p.at("creds/tls_gateway.key").c_str(), mode) == 0);
    const auto r = run_gatewayd({"--check", "--config", config}, std::chrono::seconds(10), {creds});
    BOOST_TEST(r.exit_code == 0, std::oct << mode << ": " << r.err);
    BOOST_TEST(r.err.empty(), r.err);
  }
  BOOST_REQUIRE(::chmod(p.at("creds/tls_gateway.key").c_str(), 0444) == 0);
  const auto r = run_gatewayd({"--check", "--config", config}, std::chrono::seconds(10), {creds});
  BOOST_TEST(r.exit_code == 1, r.err);
  BOOST_TEST(r.err.find("is open to its group and others (mode 0444)") != std::string::npos, r.err);
}

// With client_ca every supplier has an identity; without [suppliers_default] the ones no
// [suppliers.NAME] lists may publish anywhere: --check says so until the table is written.
BOOST_AUTO_TEST_CASE(check_warns_of_identities_no_rule_names) {
  using gatewayd::test::pki;
  pki p;
  const std::string config = p.at("gatewayd.toml").string();
  const std::string routes = p.at("routes.toml").string();
  std::ofstream{config}
      << "[gateway]\nroutes_file = \"routes.toml\"\n[tls]\ncert = \"gateway.crt\"\n"
         "key = \"gateway.key\"\nclient_ca = \"ca.crt\"\n";
  const std::string orders =
      "[suppliers.orders]\nidentity = \"orders-svc\"\npublish = [\"orders.>\"]\n";
  std::ofstream{routes} << orders;
  const auto unlisted = run_gatewayd({"--check", "--config", config});
  BOOST_TEST(unlisted.exit_code == 0, unlisted.err);
  BOOST_TEST(unlisted.err == routes +
                                 ": warning: [tls] client_ca gives every supplier an identity, "
                                 "and there is no [suppliers_default]: a supplier whose identity "
                                 "no [suppliers.NAME] lists (any certificate the CA signs) may "
                                 "publish to every address. Add [suppliers_default] with publish "
                                 "= [] to refuse them (or publish = [\">\"] to say that is "
                                 "meant)\n");
  std::ofstream{routes} << orders << "[suppliers_default]\npublish = [\">\"]\n";
  const auto said = run_gatewayd({"--check", "--config", config});
  BOOST_TEST(said.exit_code == 0, said.err);
  BOOST_TEST(said.err.empty(), said.err);
  // Without client_ca nobody has an identity: every supplier gets the default, nothing to say.
  std::ofstream{config}
      << "[gateway]\nroutes_file = \"routes.toml\"\n[tls]\ncert = \"gateway.crt\"\n"
         "key = \"gateway.key\"\n";
  std::ofstream{routes} << orders;
  const auto no_ca = run_gatewayd({"--check", "--config", config});
  BOOST_TEST(no_ca.exit_code == 0, no_ca.err);
  BOOST_TEST(no_ca.err.empty(), no_ca.err);
}

// The unit's reload check runs where systemd 252 shows no credentials: with --skip-credentials
// the files named ${CREDENTIALS_DIRECTORY}/... are left to the running gateway, and the rest of
// the configuration is still checked; without it they are errors.
BOOST_AUTO_TEST_CASE(check_can_leave_the_credentials_to_the_running_gateway) {
  using gatewayd::test::pki;
  pki p;
  const auto [config, creds] = credentials_config(p);
  const auto readable =
      run_gatewayd({"--check", "--config", config}, std::chrono::seconds(10), {creds});
  BOOST_TEST(readable.exit_code == 0, readable.err);
  BOOST_TEST(readable.out == "configuration OK: 0 consumers, 0 routes\n");

  // What ExecReload= sees: the variable set, the directory not there for it.
  const std::string hidden = "CREDENTIALS_DIRECTORY=" + p.at("hidden").string();
  const auto refused =
      run_gatewayd({"--check", "--config", config}, std::chrono::seconds(10), {hidden});
  BOOST_TEST(refused.exit_code == 1);
  BOOST_TEST(refused.err.find(p.at("hidden/tls_gateway.crt").string()) != std::string::npos,
             refused.err);
  const auto skipped = run_gatewayd({"--check", "--skip-credentials", "--config", config},
                                    std::chrono::seconds(10), {hidden});
  BOOST_TEST(skipped.exit_code == 0, skipped.err);
  BOOST_TEST(skipped.out == "configuration OK: 0 consumers, 0 routes (the TLS files in " +
                                p.at("hidden").string() + " not read)\n");
  // Skipping reads no credential, and checks everything else.
  std::ofstream{p.at("routes.toml")} << "[[routes]]\nmatch = \"a.>\"\nto = [\"nobody\"]\n";
  const auto broken = run_gatewayd({"--check", "--skip-credentials", "--config", config},
                                   std::chrono::seconds(10), {hidden});
  BOOST_TEST(broken.exit_code == 1);
  BOOST_TEST(broken.err.find("unknown consumer \"nobody\"") != std::string::npos, broken.err);
}

BOOST_AUTO_TEST_CASE(version) {
  const auto r = run_gatewayd({"--version"});
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.out.rfind("gatewayd ", 0) == 0u);
  BOOST_TEST(r.out.size() > std::string_view{"gatewayd \n"}.size());
  BOOST_TEST(r.out.back() == '\n');
}

BOOST_AUTO_TEST_CASE(help_goes_to_stdout) {
  const auto r = run_gatewayd({"--help"});
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.out.find("usage: gatewayd") == 0u);
}

BOOST_AUTO_TEST_CASE(bad_arguments_exit_2_with_usage) {
  const auto r = run_gatewayd({"--frobnicate"});
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(r.out.empty());
  BOOST_TEST(r.err.find("gatewayd: unknown option '--frobnicate'") == 0u);
  BOOST_TEST(r.err.find("usage: gatewayd") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
