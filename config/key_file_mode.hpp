// Whether a private key file is kept from other users: a key its group or others may read is
// refused at load (start-up, reload, --check), as PostgreSQL and OpenSSH refuse one.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "config/credentials.hpp"

namespace gatewayd::config {

// Why the private key file `key` must not stay as it is, when its mode lets its group or others
// in (mode & 077): who may read it, the mode, and how to fix it. Nothing when only its owner may
// use it, or when it cannot be stat()ed (the context builder reports a file it cannot read).
// A systemd credential (a file in `creds`' directory) may be readable by its group: systemd
// makes the directory the service's alone (0500, its user), and the group is its own.
std::optional<std::string> key_file_problem(const std::filesystem::path& key,
                                            const credentials& creds);

}  // namespace gatewayd::config
