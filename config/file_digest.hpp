// SHA-256 of a configuration file's bytes, in hex: how nodes that should run the same routing
// table can be told apart when they do not (gatewayd_config_info, /routez).
#pragma once

#include <string>
#include <string_view>

namespace gatewayd::config {

// 64 lowercase hex digits, as sha256sum prints them.
std::string sha256_hex(std::string_view bytes);

}  // namespace gatewayd::config
