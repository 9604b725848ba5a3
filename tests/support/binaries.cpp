#include "tests/support/binaries.hpp"

#include <cstdlib>
#include <string_view>

namespace gatewayd::test {

namespace {

std::string from_env(const char* name, const char* built) {
  const char* other = std::getenv(name);
  return other && *other ? other : built;
}

}  // namespace

const std::string& gatewayd_binary() {
  static const std::string path = from_env("GATEWAYD_TEST_DAEMON", GATEWAYD_BINARY);
  return path;
}

const std::string& peer_binary() {
  static const std::string path = from_env("GATEWAYD_TEST_PEER", GATEWAY_PEER_BINARY);
  return path;
}

bool instrumented() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#else
  const char* flag = std::getenv("GATEWAYD_TEST_INSTRUMENTED");
  return flag && std::string_view(flag) == "1";
#endif
}

}  // namespace gatewayd::test
