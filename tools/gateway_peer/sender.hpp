// `gateway-peer send`: connects to a gateway's supplier listener and sends GWP/1 frames from
// a pre-encoded buffer, patching each frame's send time and sequence number in place.
#pragma once

#include "tools/gateway_peer/options.hpp"

namespace gatewayd::tools {

// Runs the sender to completion; returns the process exit code.
int run_sender(const send_options& options);

}  // namespace gatewayd::tools
