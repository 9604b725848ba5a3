// Loads routes.toml into a routes_config, validating the whole file and reporting every error.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config_error.hpp"
#include "config/credentials.hpp"
#include "config/routes_config.hpp"

namespace gatewayd::config {

struct routes_load_result {
  std::optional<routes_config> config;  // set only when errors is empty
  std::vector<config_error> errors;     // in file order
  std::string sha256;                   // of the file's bytes as read (load_routes_file)
};

// Reads and validates a routing file. An unreadable file gives one error naming it. `creds` is
// where the consumers' TLS file names starting with ${CREDENTIALS_DIRECTORY}/ point.
routes_load_result load_routes_file(const std::filesystem::path& file,
                                    const credentials& creds = credentials::from_environment());

// Validates routing TOML held in memory; `source_name` is the file name used in errors.
routes_load_result parse_routes_config(std::string_view toml_text, const std::string& source_name,
                                       const credentials& creds = credentials::from_environment());

// True for a consumer name: one or more of [A-Za-z0-9_-] (names end up in metric labels).
bool valid_consumer_name(std::string_view name) noexcept;

}  // namespace gatewayd::config
