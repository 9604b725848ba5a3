#include "gateway/command_line.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <vector>

namespace gatewayd::gateway {

namespace {

// The VALUE of `--name VALUE` or `--name=VALUE` at args[i] (moving i past it), nothing when
// args[i] is another option, or an error when the value is missing or given twice.
struct option_value {
  std::string_view name;
  std::string_view needs;  // what the value is, for the error when it is missing
  std::optional<std::string_view> value;

  // 0: not this option; 1: taken; -1: bad (see `error`).
  int take(std::span<const std::string_view> args, std::size_t& i, std::string& error) {
    const auto arg = args[i];
    const std::string with_equals = std::string{name} + "=";
    std::string_view text;
    if (arg == name) {
      if (i + 1 < args.size()) text = args[++i];
    } else if (arg.starts_with(with_equals)) {
      text = arg.substr(with_equals.size());
    } else {
      return 0;
    }
    if (text.empty()) error = std::string{name} + " needs " + std::string{needs};
    if (value) error = std::string{name} + " given more than once";
    if (!error.empty()) return -1;
    value = text;
    return 1;
  }
};

constexpr std::string_view stop_timeout_needs =
    "the unit's TimeoutStopSec: a whole number of seconds, or infinity";

// "infinity" (no limit) or a positive whole number of seconds.
bool parse_stop_timeout(std::string_view text, std::optional<std::chrono::seconds>& out) {
  if (text == "infinity") return true;
  std::uint32_t seconds = 0;
  const auto [at, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (ec != std::errc{} || at != text.data() + text.size() || seconds == 0) return false;
  out = std::chrono::seconds(seconds);
  return true;
}

}  // namespace

command_line_result parse_command_line(std::span<const std::string_view> args) {
  command_line line;
  bool check = false;
  bool skip_credentials = false;
  bool version = false;
  bool help = false;
  option_value config{"--config", "a file path", {}};
  option_value ports_file{"--ports-file", "a file path", {}};
  option_value stop_timeout{"--stop-timeout", stop_timeout_needs, {}};
  auto fail = [](std::string why) { return command_line_result{std::nullopt, std::move(why)}; };

  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto arg = args[i];
    std::string error;
    int taken = 0;
    if (arg == "--help" || arg == "-h") {
      help = true;
    } else if (arg == "--version") {
      version = true;
    } else if (arg == "--check") {
      check = true;
    } else if (arg == "--skip-credentials") {
      skip_credentials = true;
    } else if ((taken = config.take(args, i, error)) || (taken = ports_file.take(args, i, error)) ||
               (taken = stop_timeout.take(args, i, error))) {
      if (taken < 0) return fail(error);
    } else if (arg.starts_with("-")) {
      return fail("unknown option '" + std::string{arg} + "'");
    } else {
      return fail("unexpected argument '" + std::string{arg} + "'");
    }
  }

  if (help) {
    line.what = command_line::mode::help;
  } else if (version) {
    line.what = command_line::mode::version;
  } else {
    if (!config.value) return fail("--config PATH is required");
    if (check && ports_file.value) return fail("--ports-file is for running, not with --check");
    if (!check && stop_timeout.value) return fail("--stop-timeout is only used with --check");
    if (!check && skip_credentials) return fail("--skip-credentials is only used with --check");
    if (stop_timeout.value && !parse_stop_timeout(*stop_timeout.value, line.stop_timeout)) {
      return fail("--stop-timeout needs " + std::string{stop_timeout_needs});
    }
    line.what = check ? command_line::mode::check : command_line::mode::run;
    line.skip_credentials = skip_credentials;
    line.config = std::filesystem::path{*config.value};
    if (ports_file.value) line.ports_file = std::filesystem::path{*ports_file.value};
  }
  return {std::move(line), {}};
}

command_line_result parse_command_line(int argc, const char* const* argv) {
  std::vector<std::string_view> args;
  for (int i = 1; i < argc; ++i)
    args.emplace_back(argv[i]);
  return parse_command_line(args);
}

std::string usage(std::string_view program) {
  const std::string p{program.empty() ? "gatewayd" : program};
  return "usage: " + p + " --config PATH [--ports-file FILE]  run the gateway\n" + "       " + p +
         " --check --config PATH    validate the configuration and exit\n" + "       " + p +
         " --check --stop-timeout SECONDS --config PATH\n" +
         "                                  the same, and refuse a lame_duck_ms +\n"
         "                                  drain_timeout_ms that TimeoutStopSec=SECONDS\n"
         "                                  would cut short\n" +
         "       " + p + " --check --skip-credentials ... --config PATH\n" +
         "                                  the same, without reading the files in\n"
         "                                  $CREDENTIALS_DIRECTORY (the unit's reload check)\n" +
         "       " + p + " --version                print the version and exit\n" + "       " + p +
         " --help                   print this help and exit\n" +
         "\n"
         "PATH is gatewayd.toml; it names the routing table file (routes_file).\n"
         "--check exits 0 when both files are valid, or 1 after printing every error\n"
         "as file:line:col: message.\n"
         "--ports-file FILE: once the listeners are bound, write the addresses they got (port 0\n"
         "in the configuration means any free port) to FILE as one JSON object, atomically:\n"
         "{\"pid\": N, \"supplier\": \"HOST:PORT\", \"metrics\": \"HOST:PORT\" or null}.\n"
         "The file is removed when gatewayd exits.\n"
         "--stop-timeout SECONDS (or infinity): the unit's TimeoutStopSec; --check then also\n"
         "refuses a lame_duck_ms + drain_timeout_ms that does not leave 2 s of it to exit in.\n"
         "--skip-credentials: TLS files named ${CREDENTIALS_DIRECTORY}/... are taken as the\n"
         "running gateway has them, not read: systemd copies them once, at start, and shows\n"
         "them to no ExecReload= command (the unit's reload check passes this).\n"
         "--check also warns (on stderr, exit status unchanged) of a private key its group or\n"
         "others may read, and of TLS identities no publish rule names.\n";
}

}  // namespace gatewayd::gateway
