#include "config/config_warnings.hpp"

#include <chrono>

#include "config/key_file_mode.hpp"

namespace gatewayd::config {

void add_stale_crl_warnings(const std::vector<net::tls_crl_update>& crls, const std::string& file,
                            std::uint32_t line, std::uint32_t column, const std::string& key_path,
                            std::vector<config_error>& out) {
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (const auto& c : crls) {
    if (c.next_update == 0 || c.next_update >= now) continue;
    out.push_back({file, line, column,
                   "warning: " + key_path + ": the CRL of " + c.issuer + " in " + c.file +
                       " is past its nextUpdate; still used (what it revokes stays refused), "
                       "publish a new one"});
  }
}

std::vector<config_error> configuration_warnings(const full_config& config,
                                                 const credentials& creds) {
  std::vector<config_error> out;
  const auto& service = config.service;
  const std::string config_file = service.config_file.string();
  const std::string routes_file = service.routes_file.string();
  // A readable key the loader let through: allow_readable_key is set. Said at each start.
  auto key_file = [&](const std::filesystem::path& key, const std::string& file, std::uint32_t line,
                      std::uint32_t column, const std::string& key_path) {
    if (key.empty() || (!creds.readable && creds.holds(key))) return;
    if (auto why = key_file_problem(key, creds)) {
      out.push_back({file, line, column,
                     "warning: " + key_path + ": allowed by allow_readable_key = true: " + *why});
    }
  };
  if (service.tls_allow_readable_key) key_file(service.tls_key, config_file, 0, 0, "tls.key");
  for (const auto& c : config.routing.consumers) {
    if (!c.tls) continue;
    const std::string path = "consumers." + c.name + ".tls.";
    if (c.tls->allow_readable_key)
      key_file(c.tls->files.key, routes_file, c.tls->line, c.tls->column, path + "key");
    add_stale_crl_warnings(c.tls->crls, routes_file, c.tls->line, c.tls->column, path + "crl", out);
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
