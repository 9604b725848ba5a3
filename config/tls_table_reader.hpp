// Reads the [tls] table of gatewayd.toml into the service settings: the PEM file names (cert,
// key, client_ca, crl), the key's mode rule, ktls and the handshake deadline.
#pragma once

#include <filesystem>

#include "config/credentials.hpp"
#include "config/service_config.hpp"
#include "config/toml_checker.hpp"

namespace gatewayd::config {

// `file` is gatewayd.toml (relative names are resolved against its folder); names starting with
// ${CREDENTIALS_DIRECTORY}/ are expanded with `creds`. Problems are recorded in `check`.
void read_tls_table(toml_checker& check, const toml::table& tls, const std::filesystem::path& file,
                    const credentials& creds, service_config& config);

}  // namespace gatewayd::config
