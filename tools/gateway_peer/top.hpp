// `gateway-peer top`: a live view of one gateway in the terminal, read from its metrics listener
// (/metrics, /connz, /routez) once a second, drawn with plain ANSI sequences (no curses).
#pragma once

#include "tools/gateway_peer/options.hpp"

namespace gatewayd::tools {

// Runs until q, Ctrl-C or SIGTERM (or after one look with --once); returns the exit code.
int run_top(const top_options& options);

}  // namespace gatewayd::tools
