// The binaries under test: the daemon and gateway-peer the build made beside the tests, or the
// ones the environment names (GATEWAYD_TEST_DAEMON, GATEWAYD_TEST_PEER).
#pragma once

#include <string>

namespace gatewayd::test {

// Another build's binaries give a "before" figure of a change (main's daemon).
const std::string& gatewayd_binary();
const std::string& peer_binary();

// Whether the code under test runs under a sanitizer: this test's own build is instrumented, or
// GATEWAYD_TEST_INSTRUMENTED=1 says the binaries above are (scripts/test runs Release-built
// end-to-end tests against the instrumented daemon that way). Bounds on time and memory scale
// by it, never by this build's macros alone.
bool instrumented();

}  // namespace gatewayd::test
