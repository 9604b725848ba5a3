// What a valid configuration may still do that its operator should hear about: private keys
// others can read that allow_readable_key lets through, TLS identities no publish rule names.
// Said by --check and at each start.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "config/config_error.hpp"
#include "config/service_config.hpp"

namespace gatewayd::config {

// Every warning about `config`, gatewayd.toml's first, each as "file[:line:col]: warning: ...".
// Files in the credentials directory are not looked at when `creds` says they cannot be read.
std::vector<config_error> configuration_warnings(const full_config& config,
                                                 const credentials& creds);

}  // namespace gatewayd::config
