// gateway-peer: entry point; picks the subcommand, maps bad arguments to exit code 2.
#include <csignal>
#include <iostream>
#include <string>
#include <vector>

#include "tools/gateway_peer/options.hpp"
#include "tools/gateway_peer/receiver.hpp"
#include "tools/gateway_peer/sender.hpp"
#include "tools/gateway_peer/top.hpp"

using namespace gatewayd::tools;

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);  // a closed peer is an error code on write, not a death
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    (args.empty() ? std::cerr : std::cout) << main_help;
    return args.empty() ? exit_usage : exit_ok;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  const bool help = !args.empty() && (args[0] == "--help" || args[0] == "-h");
  try {
    if (command == "send") {
      if (help) return std::cout << send_help, exit_ok;
      return run_sender(parse_send(args));
    }
    if (command == "recv") {
      if (help) return std::cout << recv_help, exit_ok;
      return run_receiver(parse_recv(args));
    }
    if (command == "top") {
      if (help) return std::cout << top_help, exit_ok;
      return run_top(parse_top(args));
    }
    std::cerr << "gateway-peer: unknown command '" << command << "'\n\n" << main_help;
    return exit_usage;
  } catch (const usage_error& e) {
    std::cerr << "gateway-peer " << command << ": " << e.what() << "\n\n"
              << (command == "send"  ? send_help
                  : command == "top" ? top_help
                                     : recv_help);
    return exit_usage;
  }
}
