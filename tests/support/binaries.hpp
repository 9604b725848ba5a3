// The binaries under test: the daemon and gateway-peer the build made beside the tests, or the
// ones the environment names (GATEWAYD_TEST_DAEMON, GATEWAYD_TEST_PEER).
#pragma once

#include <string>

namespace gatewayd::test {

// Another build's binaries give a "before" figure of a change (main's daemon), and let
// scripts/test's sanitizer steps run the Release-built drivers against instrumented binaries:
// what they check is the daemon, in a process of its own.
const std::string& gatewayd_binary();
const std::string& peer_binary();

}  // namespace gatewayd::test
