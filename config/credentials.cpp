#include "config/credentials.hpp"

#include <algorithm>
#include <cstdlib>

namespace gatewayd::config {

credentials credentials::from_environment() {
  credentials c;
  const char* dir = std::getenv("CREDENTIALS_DIRECTORY");
  if (dir && *dir) c.directory = std::filesystem::path{dir};
  return c;
}

bool credentials::holds(const std::filesystem::path& path) const {
  if (!directory) return false;
  auto dir = directory->lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();  // "/run/x/" is "/run/x"
  const auto p = path.lexically_normal();
  // Component by component, so that /run/x does not hold /run/xy.
  const auto [dir_end, p_at] = std::mismatch(dir.begin(), dir.end(), p.begin(), p.end());
  return dir_end == dir.end() && p_at != p.end();
}

expanded_name expand_file_name(std::string_view name, const credentials& creds) {
  if (name.starts_with(credentials_prefix)) {
    const auto rest = name.substr(credentials_prefix.size());
    if (rest.empty())
      return {std::nullopt, "names no file after " + std::string{credentials_prefix}};
    if (rest.find("${") != std::string_view::npos) {
      return {std::nullopt, "only a leading ${CREDENTIALS_DIRECTORY}/ is expanded"};
    }
    if (!creds.directory) {
      return {std::nullopt,
              "names a systemd credential, but CREDENTIALS_DIRECTORY is not set: gatewayd is not "
              "running under a unit that passes it with LoadCredential= (docs/security.md)"};
    }
    return {(*creds.directory / std::filesystem::path{rest}).lexically_normal(), {}};
  }
  if (name.find("${") != std::string_view::npos) {
    return {std::nullopt,
            "only a leading ${CREDENTIALS_DIRECTORY}/ is expanded; no other variable is"};
  }
  if (name.starts_with("$CREDENTIALS_DIRECTORY")) {
    return {std::nullopt, "is not expanded: write ${CREDENTIALS_DIRECTORY}/, with the braces"};
  }
  return {std::filesystem::path{name}, {}};
}

}  // namespace gatewayd::config
