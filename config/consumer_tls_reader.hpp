// Reads the `tls` table of one [consumers.NAME] in routes.toml and checks that its files make a
// client context (CA loads, certificate and key match), reporting problems at their position.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include <toml++/toml.h>

#include "config/credentials.hpp"
#include "config/toml_checker.hpp"
#include "consumers/consumer_tls.hpp"

namespace gatewayd::config {

// `consumer` is the [consumers.NAME] table, `path` its name in messages; file names are relative
// to `base` (the routes file's folder), or start with ${CREDENTIALS_DIRECTORY}/ (`creds`);
// `endpoint_host` is the server name when none is given. Nothing (and errors recorded in
// `check`) when the table is absent or wrong. When `creds` is not readable (--check
// --skip-credentials) and a file is in the credentials directory, the files are not read: no
// digest, no context (such a result is only checked, never run).
std::optional<consumers::consumer_tls> read_consumer_tls(
    toml_checker& check, const toml::table& consumer, const std::string& path,
    const std::filesystem::path& base, const credentials& creds, const std::string& endpoint_host);

}  // namespace gatewayd::config
