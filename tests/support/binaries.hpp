// The binaries under test: the daemon and gateway-peer the build made beside the tests, or the
// ones the environment names (GATEWAYD_TEST_DAEMON, GATEWAYD_TEST_PEER).
#pragma once

#include <string>

namespace gatewayd::test {

// Another build's binaries give a "before" figure of a change (main's daemon). Tests that scale
// a bound for sanitizers read it from their own build (__SANITIZE_ADDRESS__), so a Release-built
// test run against an instrumented daemon would apply the Release bounds.
const std::string& gatewayd_binary();
const std::string& peer_binary();

}  // namespace gatewayd::test
