// What a valid configuration may still do that its operator should hear about: private keys
// others can read, TLS identities no publish rule names. Said by --check and at start-up.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "config/config_error.hpp"
#include "config/service_config.hpp"

namespace gatewayd::config {

// Why the private key file `key` should not stay as it is, when its mode lets its group or others
// in (mode & 077): what they may do, the mode, and how to fix it. Nothing when only its owner
// may use it, or when it cannot be stat()ed (the loaders report a file they cannot read).
std::optional<std::string> key_file_warning(const std::filesystem::path& key);

// Every warning about `config`, gatewayd.toml's first, each as "file[:line:col]: warning: ...".
// Files in the credentials directory are not looked at when `creds` says they cannot be read.
std::vector<config_error> configuration_warnings(const full_config& config,
                                                 const credentials& creds);

}  // namespace gatewayd::config
