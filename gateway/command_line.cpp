#include "gateway/command_line.hpp"

#include <algorithm>
#include <vector>

namespace gatewayd::gateway {

command_line_result parse_command_line(std::span<const std::string_view> args) {
  command_line line;
  bool check = false;
  bool version = false;
  bool help = false;
  std::optional<std::filesystem::path> config;
  auto fail = [](std::string why) { return command_line_result{std::nullopt, std::move(why)}; };

  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto arg = args[i];
    if (arg == "--help" || arg == "-h") {
      help = true;
    } else if (arg == "--version") {
      version = true;
    } else if (arg == "--check") {
      check = true;
    } else if (arg == "--config" || arg.starts_with("--config=")) {
      std::string_view value;
      if (arg == "--config") {
        if (i + 1 == args.size()) return fail("--config needs a file path");
        value = args[++i];
      } else {
        value = arg.substr(std::string_view{"--config="}.size());
      }
      if (value.empty()) return fail("--config needs a file path");
      if (config) return fail("--config given more than once");
      config = std::filesystem::path{value};
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
    if (!config) return fail("--config PATH is required");
    line.what = check ? command_line::mode::check : command_line::mode::run;
    line.config = std::move(*config);
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
  return "usage: " + p + " --config PATH          run the gateway\n" + "       " + p +
         " --check --config PATH  validate the configuration and exit\n" + "       " + p +
         " --version              print the version and exit\n" + "       " + p +
         " --help                 print this help and exit\n" +
         "\n"
         "PATH is gatewayd.toml; it names the routing table file (routes_file).\n"
         "--check exits 0 when both files are valid, or 1 after printing every error\n"
         "as file:line:col: message.\n";
}

}  // namespace gatewayd::gateway
