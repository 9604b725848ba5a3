// Debian's real HAProxy in front of gatewayd nodes, for the scale-out tests: the sample
// etc/haproxy.cfg pointed at the test's loopback ports, and the backend's view of each node.
#pragma once

#include <string>

#include "tests/support/gateway_fixture.hpp"

namespace gatewayd::test {

inline const char* const haproxy_binary = "/usr/sbin/haproxy";  // Debian package haproxy

// etc/haproxy.cfg with the test's ports, a log on stdout, checks every 100 ms and a maxconn a
// container's file limit allows, for nodes gw1 (`n1`) and gw2 (`n2`). Fails the test if the
// sample lost a line the tests rely on.
std::string haproxy_config(unsigned short front, unsigned short stats, const gateway_fixture& n1,
                           const gateway_fixture& n2);

// The status HAProxy's stats page gives server `name` of the backend ("UP", "DOWN", ...).
std::string server_status(unsigned short stats_port, const std::string& name);

}  // namespace gatewayd::test
