// gatewayd's command line, parsed into plain data so it can be tested without running anything.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace gatewayd::gateway {

struct command_line {
  enum class mode { run, check, version, help };
  mode what = mode::run;
  std::filesystem::path config;      // set for run and check
  std::filesystem::path ports_file;  // run only; empty = none
  // check only: how long systemd waits after SIGTERM before it kills (the unit's
  // TimeoutStopSec, which systemd does not export; the unit passes it). None: no limit.
  std::optional<std::chrono::seconds> stop_timeout;
  // check only (the unit's ExecReload=): files in $CREDENTIALS_DIRECTORY are not read. systemd
  // 252 shows that directory to no ExecReload= process, and a reload cannot change it.
  bool skip_credentials = false;
};

struct command_line_result {
  std::optional<command_line> line;  // nullopt on bad arguments
  std::string error;                 // why, for the operator (usage follows it)
};

// Parses the arguments after the program name: `--config PATH` (or `--config=PATH`),
// `--ports-file PATH` (or `=PATH`), `--check`, `--stop-timeout SECONDS|infinity` and
// `--skip-credentials` (with --check), `--version`, `--help` / `-h`. --version and --help win over
// everything else, as GNU tools do, so `gatewayd --config x --version` prints the version.
command_line_result parse_command_line(std::span<const std::string_view> args);
command_line_result parse_command_line(int argc, const char* const* argv);

// The usage text, naming the program as invoked.
std::string usage(std::string_view program);

}  // namespace gatewayd::gateway
