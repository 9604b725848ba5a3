#include "tests/support/peer_tool.hpp"

#include <regex>
#include <stdexcept>

namespace gatewayd::test {

peer_receiver::peer_receiver(const temp_dir& dir, const std::string& name,
                             std::vector<std::string> args) {
  args.insert(args.begin(), {"recv", "--listen", "127.0.0.1:0"});
  process = std::make_unique<daemon_process>(peer_binary(), args, dir.path() / (name + ".log"));
  const auto line = process->wait_for_log("listening on", std::chrono::seconds(10));
  if (line) port = port_in(*line);
  if (port == 0) throw std::runtime_error("gateway-peer recv did not start: " + process->log());
}

long long json_field(const std::string& text, const std::string& key) {
  const std::regex re("\"" + key + "\": ([0-9]+)");
  std::smatch m;
  return std::regex_search(text, m, re) ? std::stoll(m[1]) : -1;
}

}  // namespace gatewayd::test
