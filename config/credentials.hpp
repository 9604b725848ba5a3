// Where systemd's credentials are (LoadCredential=): file names in the configuration may start
// with "${CREDENTIALS_DIRECTORY}/", the one variable the readers expand, and only there.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace gatewayd::config {

// What a file name starts with to name a credential: systemd copies each file LoadCredential=
// names into a directory only the service's user can read, and gives its path in
// $CREDENTIALS_DIRECTORY.
inline constexpr std::string_view credentials_prefix = "${CREDENTIALS_DIRECTORY}/";

struct credentials {
  // $CREDENTIALS_DIRECTORY; nothing when it is unset or empty.
  std::optional<std::filesystem::path> directory;
  // False for `gatewayd --check --skip-credentials`, the unit's ExecReload= check: systemd 252
  // shows the credentials to no ExecReload= process (systemd issue #35227) and never refreshes
  // them on reload, so the files there are those the running gateway started with and are not
  // read again. Never false for a configuration the daemon runs.
  bool readable = true;

  // From this process's environment.
  static credentials from_environment();

  // True when `path` (as expanded) lies in the credentials directory.
  bool holds(const std::filesystem::path& path) const;
};

struct expanded_name {
  std::optional<std::filesystem::path> path;  // as written, or under the credentials directory
  std::string error;                          // why not, when path is empty
};

// Expands a leading "${CREDENTIALS_DIRECTORY}/" in a configured file name. Any other "${" is an
// error (nothing else is expanded, and a name that looks expanded should not be taken
// literally); so is the prefix while the variable is unset. A relative result is left relative.
expanded_name expand_file_name(std::string_view name, const credentials& creds);

}  // namespace gatewayd::config
