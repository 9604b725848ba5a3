// The systemd unit as systemd itself judges it (verify, security), and the install rules that
// put it, the binary and the sample configuration in place.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "tests/support/binaries.hpp"
#include "tests/support/daemon_process.hpp"

using namespace gatewayd::test;
namespace fs = std::filesystem;

namespace {

const std::string systemd_analyze = "/usr/bin/systemd-analyze";

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// The unit as shipped, pointed at the binary this build made (verify checks that it exists).
fs::path unit_copy(const temp_dir& dir, const std::string& extra_line = "") {
  auto unit = read_file(fs::path(GATEWAYD_SOURCE_DIR) / "systemd/gatewayd.service");
  BOOST_TEST_REQUIRE(!unit.empty());
  unit = replace_all(unit, "/usr/sbin/gatewayd", gatewayd_binary());
  if (!extra_line.empty())
    unit = replace_all(unit, "[Service]\n", "[Service]\n" + extra_line + "\n");
  return dir.write("gatewayd.service", unit);
}

double exposure_of(const fs::path& unit) {
  const auto r =
      run_command(systemd_analyze, {"security", "--offline=true", "--no-pager", unit.string()});
  static const std::regex re(R"(Overall exposure level for [^:]+: ([0-9]+\.[0-9]+))");
  std::smatch m;
  const std::string all = r.out + r.err;
  BOOST_TEST_REQUIRE(std::regex_search(all, m, re), all);
  return std::stod(m[1]);
}

}  // namespace

BOOST_AUTO_TEST_CASE(systemd_analyze_verify_prints_nothing) {
  BOOST_TEST_REQUIRE(fs::exists(systemd_analyze));
  temp_dir dir;
  const auto r = run_command(systemd_analyze, {"verify", unit_copy(dir).string()});
  BOOST_TEST(r.exit_code == 0);
  // verify exits 0 on unknown keys and bad values: any output at all is a finding.
  BOOST_TEST(r.out.empty(), r.out);
  BOOST_TEST(r.err.empty(), r.err);
}

BOOST_AUTO_TEST_CASE(verify_would_catch_a_typo) {
  // The check above can fail: the same unit with a misspelt key is reported.
  temp_dir dir;
  const auto r =
      run_command(systemd_analyze, {"verify", unit_copy(dir, "WatchdogSecs=10").string()});
  BOOST_TEST(!(r.out + r.err).empty());
}

BOOST_AUTO_TEST_CASE(security_exposure_is_at_most_1_2) {
  temp_dir dir;
  const double exposure = exposure_of(unit_copy(dir));
  BOOST_TEST_MESSAGE("systemd-analyze security --offline=true: exposure " << exposure);
  BOOST_TEST(exposure <= 1.2);
  // ... and the scale is real: without the sandbox the same unit scores far worse.
  temp_dir bare;
  auto unit = read_file(fs::path(GATEWAYD_SOURCE_DIR) / "systemd/gatewayd.service");
  unit = unit.substr(0, unit.find("# Identity:")) + "\n[Install]\nWantedBy=multi-user.target\n";
  BOOST_TEST(exposure_of(bare.write("gatewayd.service", unit)) > 5.0);
}

BOOST_AUTO_TEST_CASE(unit_checks_the_config_before_start_and_reload) {
  const auto unit = read_file(fs::path(GATEWAYD_SOURCE_DIR) / "systemd/gatewayd.service");
  const std::string check =
      "/usr/sbin/gatewayd --check --stop-timeout ${GATEWAYD_TIMEOUT_STOP_SEC} --config "
      "/etc/gatewayd/gatewayd.toml";
  // systemd 252 shows no credentials to ExecReload=: that check leaves them to the gateway.
  const std::string reload_check_line =
      "/usr/sbin/gatewayd --check --skip-credentials --stop-timeout "
      "${GATEWAYD_TIMEOUT_STOP_SEC} --config /etc/gatewayd/gatewayd.toml";
  BOOST_TEST(unit.find("\nType=notify\n") != std::string::npos);
  BOOST_TEST(unit.find("\nExecStartPre=" + check + "\n") != std::string::npos);
  // ExecReload lines run in order and stop at the first failure: check, then signal.
  const auto reload_check = unit.find("\nExecReload=" + reload_check_line + "\n");
  const auto reload_hup = unit.find("\nExecReload=/bin/kill -HUP $MAINPID\n");
  BOOST_TEST_REQUIRE(reload_check != std::string::npos);
  BOOST_TEST_REQUIRE(reload_hup != std::string::npos);
  BOOST_TEST(reload_check < reload_hup);
  for (const char* line :
       {"\nWatchdogSec=", "\nRestart=on-failure\n", "\nLimitNOFILE=65536\n", "\nDynamicUser=yes\n",
        "\nCapabilityBoundingSet=\n", "\nRestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX\n",
        "\nSystemCallFilter=@system-service\n", "\nMemoryDenyWriteExecute=yes\n",
        // No core dumps (they would hold keys and frames); keys come as credentials.
        "\nLimitCORE=0\n", "\nLoadCredential=tls:/etc/gatewayd/credentials\n"})
    BOOST_TEST(unit.find(line) != std::string::npos, line);
}

// systemd reads the new directives as meant: verify reports a credential it could not use, and
// a core limit it cannot parse, so the clean verify above covers them.
BOOST_AUTO_TEST_CASE(verify_would_catch_a_bad_credential_or_core_limit) {
  for (const char* line : {"LoadCredential=tls:relative/path", "LimitCORE=zero"}) {
    temp_dir dir;
    const auto r = run_command(systemd_analyze, {"verify", unit_copy(dir, line).string()});
    BOOST_TEST(!(r.out + r.err).empty(), line);
  }
}

BOOST_AUTO_TEST_CASE(cmake_install_to_a_prefix_puts_everything_in_place) {
  temp_dir dir;
  const auto prefix = dir.path() / "p";
  const auto r =
      run_command(GATEWAYD_CMAKE, {"--install", GATEWAYD_BUILD_DIR, "--prefix", prefix.string()});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.out << r.err);
  const auto binary = prefix / "sbin/gatewayd";
  const auto unit = prefix / "lib/systemd/system/gatewayd.service";
  BOOST_TEST_REQUIRE(fs::exists(binary));
  const bool executable =
      (fs::status(binary).permissions() & fs::perms::owner_exec) != fs::perms::none;
  BOOST_TEST(executable);
  BOOST_TEST_REQUIRE(fs::exists(unit));
  BOOST_TEST(fs::exists(prefix / "etc/gatewayd/gatewayd.toml"));
  BOOST_TEST(fs::exists(prefix / "etc/gatewayd/routes.toml"));
  // The credentials directory LoadCredential= reads: there (or the unit would not start), empty,
  // its owner's alone.
  const auto credentials = prefix / "etc/gatewayd/credentials";
  BOOST_TEST_REQUIRE(fs::is_directory(credentials));
  BOOST_TEST(fs::is_empty(credentials));
  BOOST_TEST((fs::status(credentials).permissions() == fs::perms::owner_all));
  // The unit names this prefix's binary, configuration and credentials...
  const auto text = read_file(unit);
  BOOST_TEST(
      text.find("ExecStart=" + binary.string() + " --config " +
                (prefix / "etc/gatewayd/gatewayd.toml").string() + "\n") != std::string::npos,
      text);
  BOOST_TEST(text.find("\nLoadCredential=tls:" + credentials.string() + "\n") != std::string::npos);
  BOOST_TEST(text.find("/usr/sbin/") == std::string::npos);
  // ... systemd accepts it as installed, and the installed samples pass --check.
  const auto v = run_command(systemd_analyze, {"verify", unit.string()});
  BOOST_TEST(v.exit_code == 0);
  BOOST_TEST((v.out + v.err).empty(), v.out << v.err);
  const auto c = run_command(
      binary.string(), {"--check", "--config", (prefix / "etc/gatewayd/gatewayd.toml").string()});
  BOOST_TEST(c.exit_code == 0, c.out << c.err);
}

BOOST_AUTO_TEST_CASE(destdir_install_for_usr_keeps_an_operators_configuration) {
  temp_dir dir;
  const auto root = dir.path() / "root";
  auto install = [&] {
    std::string destdir = "DESTDIR=";
    destdir += root.string();
    return run_command("/usr/bin/env", {destdir, GATEWAYD_CMAKE, "--install", GATEWAYD_BUILD_DIR,
                                        "--prefix", "/usr"});
  };
  auto r = install();
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.out << r.err);
  const auto config = root / "etc/gatewayd/gatewayd.toml";
  const auto routes = root / "etc/gatewayd/routes.toml";
  BOOST_TEST(fs::exists(root / "usr/sbin/gatewayd"));
  const auto unit = root / fs::path(GATEWAYD_SYSTEM_UNIT_DIR).relative_path() / "gatewayd.service";
  BOOST_TEST_REQUIRE(fs::exists(unit));
  // Installed for /usr, the unit is the shipped one, byte for byte.
  BOOST_TEST(read_file(unit) ==
             read_file(fs::path(GATEWAYD_SOURCE_DIR) / "systemd/gatewayd.service"));
  BOOST_TEST_REQUIRE(fs::exists(config));
  BOOST_TEST_REQUIRE(fs::exists(routes));
  // The sample as shipped, but its spools in the unit's StateDirectory=.
  std::string sample = read_file(fs::path(GATEWAYD_SOURCE_DIR) / "etc/gatewayd.toml");
  const std::string local = "spool_dir = \"spool\"";
  BOOST_TEST_REQUIRE(sample.find(local) != std::string::npos);
  sample.replace(sample.find(local), local.size(), "spool_dir = \"/var/lib/gatewayd/spool\"");
  BOOST_TEST(read_file(config) == sample);
  const auto credentials = root / "etc/gatewayd/credentials";
  BOOST_TEST_REQUIRE(fs::is_directory(credentials));
  BOOST_TEST((fs::status(credentials).permissions() == fs::perms::owner_all));

  // An operator edits one file and deletes the other, and puts a key in the credentials; a
  // second install (an upgrade by hand) keeps the edit and the key and brings back only what is
  // missing.
  std::ofstream(config, std::ios::app) << "# edited by the operator\n";
  const auto edited = read_file(config);
  fs::remove(routes);
  std::ofstream(credentials / "gateway.key") << "operator's key\n";
  r = install();
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.out << r.err);
  BOOST_TEST(read_file(config) == edited);
  BOOST_TEST(fs::exists(routes));
  BOOST_TEST(read_file(credentials / "gateway.key") == "operator's key\n");
  BOOST_TEST(r.out.find("Keeping existing: " + config.string()) != std::string::npos, r.out);
}

// systemd exports no timeout to the commands it runs, so the unit tells its --check the
// TimeoutStopSec it sets: the check, run as systemd would run it (Environment= expanded),
// refuses a drain_timeout_ms that systemd would cut short, and accepts the default.
BOOST_AUTO_TEST_CASE(the_units_check_refuses_a_drain_its_stop_timeout_would_cut_short) {
  const auto unit = read_file(fs::path(GATEWAYD_SOURCE_DIR) / "systemd/gatewayd.service");
  std::smatch m;
  BOOST_TEST_REQUIRE(std::regex_search(unit, m, std::regex(R"(\nTimeoutStopSec=(\d+)\n)")));
  const int stop = std::stoi(m[1]);
  BOOST_TEST_REQUIRE(
      std::regex_search(unit, m, std::regex(R"(\nEnvironment=GATEWAYD_TIMEOUT_STOP_SEC=(\d+)\n)")));
  BOOST_TEST(std::stoi(m[1]) == stop, "TimeoutStopSec and GATEWAYD_TIMEOUT_STOP_SEC differ");

  temp_dir dir;
  dir.write("routes.toml", "");
  for (const std::string key : {"ExecStartPre", "ExecReload"}) {
    BOOST_TEST_REQUIRE(std::regex_search(
        unit, m, std::regex("\n" + key + "=(/usr/sbin/gatewayd --check [^\n]*)\n")));
    std::string command = replace_all(m[1], "${GATEWAYD_TIMEOUT_STOP_SEC}", std::to_string(stop));
    command =
        replace_all(command, "/etc/gatewayd/gatewayd.toml", (dir.path() / "gw.toml").string());
    std::vector<std::string> args;
    std::istringstream words(command);
    for (std::string w; words >> w;)
      args.push_back(w);
    const std::string binary = gatewayd_binary();
    args.erase(args.begin());
    for (const auto& [drain, expected] : {std::pair{(stop - 1) * 1000, 1}, std::pair{5000, 0}}) {
      dir.write("gw.toml", "[gateway]\nroutes_file = \"routes.toml\"\ndrain_timeout_ms = " +
                               std::to_string(drain) + "\n");
      const auto r = run_command(binary, args);
      BOOST_TEST(r.exit_code == expected,
                 key << " with drain_timeout_ms = " << drain << ": " << r.out << r.err);
    }
  }
}
