// What a valid configuration may still do that its operator should hear about: private keys
// others can read that allow_readable_key lets through, CRLs past their nextUpdate, TLS
// identities no publish rule names.
// Said by --check and at each start.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "config/config_error.hpp"
#include "config/service_config.hpp"
#include "net/tls_context.hpp"

namespace gatewayd::config {

// "warning: KEY_PATH: the CRL of ISSUER in FILE is past its nextUpdate ..." for each CRL of
// `crls` whose nextUpdate has passed, at file:line:column: still used, but it should be replaced.
void add_stale_crl_warnings(const std::vector<net::tls_crl_update>& crls, const std::string& file,
                            std::uint32_t line, std::uint32_t column, const std::string& key_path,
                            std::vector<config_error>& out);

// Every warning about `config`, gatewayd.toml's first, each as "file[:line:col]: warning: ...".
// Files in the credentials directory are not looked at when `creds` says they cannot be read.
std::vector<config_error> configuration_warnings(const full_config& config,
                                                 const credentials& creds);

}  // namespace gatewayd::config
