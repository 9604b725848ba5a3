// `gateway-peer recv`: a consumer endpoint the gateway dials. Accepts any number of
// connections on one epoll thread, parses every frame, times it and checks its order.
#pragma once

#include "tools/gateway_peer/options.hpp"

namespace gatewayd::tools {

// Runs the receiver until --duration, --expect or SIGINT/SIGTERM; returns the exit code.
int run_receiver(const recv_options& options);

}  // namespace gatewayd::tools
