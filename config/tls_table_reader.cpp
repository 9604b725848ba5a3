#include "config/tls_table_reader.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

#include "config/config_text.hpp"
#include "config/key_file_mode.hpp"
#include "config/settings.hpp"

namespace gatewayd::config {
namespace {

namespace fs = std::filesystem;
using presence = toml_checker::presence;

class tls_reader {
 public:
  tls_reader(toml_checker& check, const fs::path& file, const credentials& creds,
             service_config& config)
      : check_(check), file_(file), creds_(creds), config_(config) {}

  // A [tls] file name: not empty, relative to gatewayd.toml or under
  // ${CREDENTIALS_DIRECTORY}/. Whether it loads is checked where the context is built
  // (net/tls_context), by --check and at start-up alike.
  void tls_file(const toml::table& t, std::string_view key, presence needed, fs::path& out) {
    auto name = check_.string(t, "tls", key, needed);
    if (!name) return;
    const std::string path = "tls." + std::string{key};
    if (name->empty()) {
      check_.error(*t.get(key), path + ": must not be empty");
      return;
    }
    auto expanded = expand_file_name(*name, creds_);
    if (!expanded.path) {
      check_.error(*t.get(key), path + ": " + in_quotes(*name) + " " + expanded.error);
      return;
    }
    const fs::path& named = *expanded.path;
    out = absolute_normal(named.is_absolute() ? named : file_.parent_path() / named);
  }

  void read_tls(const toml::table& t) {
    check_.reject_unknown_keys(t, "tls", keys_of("tls"));
    read_rows(check_, t, "tls", config_);  // allow_readable_key, handshake_timeout_ms
    tls_file(t, "cert", presence::required, config_.tls_cert);
    tls_file(t, "key", presence::required, config_.tls_key);
    tls_file(t, "client_ca", presence::optional, config_.tls_client_ca);
    tls_file(t, "crl", presence::optional, config_.tls_crl);
    if (!config_.tls_crl.empty() && config_.tls_client_ca.empty()) {
      check_.error(*t.get("crl"),
                   "tls.crl: revokes suppliers' certificates, which only client_ca asks for");
    }
    read_key_mode(t);
    if (auto mode = check_.string(t, "tls", "ktls")) {
      if (auto m = ktls_mode_names.parse(*mode)) {
        config_.tls_ktls = *m;
      } else {
        check_.error(*t.get("ktls"), "tls.ktls: unknown mode " + in_quotes(*mode) + " (expected " +
                                         ktls_mode_names.choices() + ")");
      }
    }
  }

  // A key others may read is refused unless allow_readable_key says access is managed otherwise.
  // Left to the running gateway when --check --skip-credentials cannot read it.
  void read_key_mode(const toml::table& t) {
    if (config_.tls_key.empty() || config_.tls_allow_readable_key) return;
    if (!creds_.readable && creds_.holds(config_.tls_key)) return;
    if (auto why = key_file_problem(config_.tls_key, creds_)) {
      check_.error(*t.get("key"), "tls.key: " + *why);
    }
  }

 private:
  toml_checker& check_;
  const fs::path& file_;
  const credentials& creds_;
  service_config& config_;
};

}  // namespace

void read_tls_table(toml_checker& check, const toml::table& tls, const fs::path& file,
                    const credentials& creds, service_config& config) {
  tls_reader{check, file, creds, config}.read_tls(tls);
}

}  // namespace gatewayd::config
