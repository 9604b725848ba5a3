#include "gateway/command_line.hpp"

#include <algorithm>
#include <vector>

namespace gatewayd::gateway {

namespace {

// The PATH of `--name PATH` or `--name=PATH` at args[i] (moving i past it), nothing when args[i]
// is another option, or an error when the path is missing or given twice.
struct path_option {
  std::string_view name;
  std::optional<std::filesystem::path> value;

  // 0: not this option; 1: taken; -1: bad (see `error`).
  int take(std::span<const std::string_view> args, std::size_t& i, std::string& error) {
    const auto arg = args[i];
    const std::string with_equals = std::string{name} + "=";
    std::string_view path;
    if (arg == name) {
      if (i + 1 < args.size()) path = args[++i];
    } else if (arg.starts_with(with_equals)) {
      path = arg.substr(with_equals.size());
    } else {
      return 0;
    }
    if (path.empty()) error = std::string{name} + " needs a file path";
    if (value) error = std::string{name} + " given more than once";
    if (!error.empty()) return -1;
    value = std::filesystem::path{path};
    return 1;
  }
};

}  // namespace

command_line_result parse_command_line(std::span<const std::string_view> args) {
  command_line line;
  bool check = false;
  bool version = false;
  bool help = false;
  path_option config{"--config", {}};
  path_option ports_file{"--ports-file", {}};
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
    } else if ((taken = config.take(args, i, error)) || (taken = ports_file.take(args, i, error))) {
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
    line.what = check ? command_line::mode::check : command_line::mode::run;
    line.config = std::move(*config.value);
    line.ports_file = ports_file.value.value_or(std::filesystem::path{});
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
         " --version                print the version and exit\n" + "       " + p +
         " --help                   print this help and exit\n" +
         "\n"
         "PATH is gatewayd.toml; it names the routing table file (routes_file).\n"
         "--check exits 0 when both files are valid, or 1 after printing every error\n"
         "as file:line:col: message.\n"
         "--ports-file FILE: once the listeners are bound, write the addresses they got (port 0\n"
         "in the configuration means any free port) to FILE as one JSON object, atomically:\n"
         "{\"pid\": N, \"supplier\": \"HOST:PORT\", \"metrics\": \"HOST:PORT\" or null}.\n"
         "The file is removed when gatewayd exits.\n";
}

}  // namespace gatewayd::gateway
