#include "config/key_file_mode.hpp"

#include <sys/stat.h>

#include <cstdio>

namespace gatewayd::config {

std::optional<std::string> key_file_problem(const std::filesystem::path& key,
                                            const credentials& creds) {
  struct stat st {};
  // stat, not lstat: what matters is the file a symlink leads to.
  if (::stat(key.c_str(), &st) != 0) return std::nullopt;
  const unsigned mode = st.st_mode & 07777;
  const unsigned open_to = creds.holds(key) ? (mode & 007) : (mode & 077);
  if (open_to == 0) return std::nullopt;
  const char* who = (mode & 070) && (mode & 007) ? "its group and others"
                    : (mode & 070)               ? "its group"
                                                 : "others";
  char octal[8];
  std::snprintf(octal, sizeof octal, "%04o", mode);
  return "the private key " + key.string() + " is open to " + who + " (mode " + octal +
         "); let only its owner read it: chmod 600 " + key.string() +
         ", owned by the user gatewayd runs as (chown); under systemd keep it in "
         "/etc/gatewayd/credentials/ (root's) and name it ${CREDENTIALS_DIRECTORY}/tls_NAME "
         "(LoadCredential=, see docs/security.md); or, where access is managed otherwise, "
         "allow_readable_key = true";
}

}  // namespace gatewayd::config
