#include "config/config_warnings.hpp"

#include <sys/stat.h>

#include <cstdio>

namespace gatewayd::config {

std::optional<std::string> key_file_warning(const std::filesystem::path& key) {
  struct stat st {};
  // stat, not lstat: what matters is the file a symlink leads to.
  if (::stat(key.c_str(), &st) != 0) return std::nullopt;
  const unsigned mode = st.st_mode & 07777;
  if ((mode & 077) == 0) return std::nullopt;
  const char* who = (mode & 070) && (mode & 007) ? "its group and others"
                    : (mode & 070)               ? "its group"
                                                 : "others";
  char octal[8];
  std::snprintf(octal, sizeof octal, "%04o", mode);
  return "the private key " + key.string() + " is open to " + who + " (mode " + octal +
         "); let only its owner read it: chmod 600 " + key.string() +
         ", owned by the user gatewayd runs as (chown); under systemd keep it in "
         "/etc/gatewayd/credentials/ (root's) and name it ${CREDENTIALS_DIRECTORY}/tls_NAME, "
         "see docs/security.md";
}

std::vector<config_error> configuration_warnings(const full_config& config,
                                                 const credentials& creds) {
  std::vector<config_error> out;
  const auto& service = config.service;
  const std::string config_file = service.config_file.string();
  const std::string routes_file = service.routes_file.string();
  auto key_file = [&](const std::filesystem::path& key, const std::string& file, std::uint32_t line,
                      std::uint32_t column, const std::string& key_path) {
    if (key.empty() || (!creds.readable && creds.holds(key))) return;
    if (auto why = key_file_warning(key)) {
      out.push_back({file, line, column, "warning: " + key_path + ": " + *why});
    }
  };
  key_file(service.tls_key, config_file, 0, 0, "tls.key");
  for (const auto& c : config.routing.consumers) {
    if (c.tls)
      key_file(c.tls->files.key, routes_file, c.tls->line, c.tls->column,
               "consumers." + c.name + ".tls.key");
  }
  // With client_ca every supplier has an identity; without [suppliers_default], an identity no
  // [suppliers.NAME] lists falls to the implicit rule, which lets it publish anywhere.
  if (!service.tls_client_ca.empty() && !config.routing.suppliers_default_written) {
    out.push_back({routes_file, 0, 0,
                   "warning: [tls] client_ca gives every supplier an identity, and there is no "
                   "[suppliers_default]: a supplier whose identity no [suppliers.NAME] lists (any "
                   "certificate the CA signs) may publish to every address. Add "
                   "[suppliers_default] with publish = [] to refuse them (or publish = [\">\"] "
                   "to say that is meant)"});
  }
  return out;
}

}  // namespace gatewayd::config
