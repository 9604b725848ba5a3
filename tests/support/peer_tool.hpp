// The real gateway-peer tool as a child process for end-to-end tests: a verifying consumer
// endpoint (`recv`) and the value of a field of its --json summary.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tests/support/binaries.hpp"
#include "tests/support/daemon_process.hpp"

namespace gatewayd::test {

// `gateway-peer recv ARGS...` on a kernel-chosen 127.0.0.1 port, logging to `dir`/NAME.log; the
// port is the one it prints on stderr ("listening on HOST:PORT", its documented interface).
struct peer_receiver {
  std::unique_ptr<daemon_process> process;
  unsigned short port = 0;

  peer_receiver(const temp_dir& dir, const std::string& name, std::vector<std::string> args);
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port); }
};

// The integer value of "key": N in a --json summary, or -1.
long long json_field(const std::string& text, const std::string& key);

}  // namespace gatewayd::test
