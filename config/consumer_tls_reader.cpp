#include "config/consumer_tls_reader.hpp"

#include <fstream>
#include <sstream>
#include <utility>

#include "config/file_digest.hpp"
#include "config/key_file_mode.hpp"
#include "config/ktls_mode.hpp"

namespace gatewayd::config {
namespace {

namespace fs = std::filesystem;
using presence = toml_checker::presence;

// A file name from the table: not empty, a leading ${CREDENTIALS_DIRECTORY}/ expanded, made
// absolute against `base`.
std::optional<fs::path> file_name(toml_checker& check, const toml::table& tls,
                                  const std::string& path, std::string_view key, presence needed,
                                  const fs::path& base, const credentials& creds) {
  auto name = check.string(tls, path, key, needed);
  if (!name) return std::nullopt;
  const std::string key_path = path + "." + std::string{key};
  if (name->empty()) {
    check.error(*tls.get(key), key_path + ": must not be empty");
    return std::nullopt;
  }
  auto expanded = expand_file_name(*name, creds);
  if (!expanded.path) {
    check.error(*tls.get(key), key_path + ": \"" + *name + "\" " + expanded.error);
    return std::nullopt;
  }
  const fs::path& named = *expanded.path;
  return (named.is_absolute() ? named : base / named).lexically_normal();
}

// The bytes of `file`, or nothing (reported at `where`).
std::optional<std::string> contents(toml_checker& check, const toml::node& where,
                                    const std::string& key_path, const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    check.error(where, key_path + ": cannot read " + file.string());
    return std::nullopt;
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return std::move(bytes).str();
}

// The file names, server name and ktls mode into `out`; false if any is wrong (reported).
bool read_names(toml_checker& check, const toml::table& tls, const std::string& path,
                const fs::path& base, const credentials& creds, const std::string& endpoint_host,
                consumers::consumer_tls& out) {
  bool ok = true;
  if (auto ca = file_name(check, tls, path, "ca", presence::required, base, creds)) {
    out.files.ca = std::move(*ca);
  } else {
    ok = false;
  }
  // Absent: the endpoint's host (an IP literal, as the loader wants), which the consumer's
  // certificate must then carry as an IP address SAN.
  out.files.server_name = endpoint_host;
  if (auto name = check.string(tls, path, "server_name")) {
    if (name->empty()) {
      check.error(*tls.get("server_name"), path + ".server_name: must not be empty");
      ok = false;
    }
    out.files.server_name = std::move(*name);
  }
  const auto cert = file_name(check, tls, path, "cert", presence::optional, base, creds);
  const auto key = file_name(check, tls, path, "key", presence::optional, base, creds);
  if (tls.contains("cert") != tls.contains("key")) {
    check.error(tls, path + ": cert and key go together (a client certificate needs its key); " +
                         (tls.contains("cert") ? "key" : "cert") + " is missing");
    ok = false;
  }
  if (cert && key) {
    out.files.cert = *cert;
    out.files.key = *key;
  } else if (tls.contains("cert") || tls.contains("key")) {
    ok = false;
  }
  if (auto crl = file_name(check, tls, path, "crl", presence::optional, base, creds)) {
    out.files.crl = std::move(*crl);
  } else if (tls.contains("crl")) {
    ok = false;
  }
  if (auto allow = check.boolean(tls, path, "allow_readable_key")) out.allow_readable_key = *allow;
  if (auto mode = check.string(tls, path, "ktls")) {
    if (const auto m = ktls_mode_names.parse(*mode)) {
      out.kernel_tls = *m == ktls_mode::automatic;
    } else {
      check.error(*tls.get("ktls"), path + ".ktls: unknown mode \"" + *mode + "\" (expected " +
                                        ktls_mode_names.choices() + ")");
      ok = false;
    }
  }
  return ok && !out.files.server_name.empty();
}

// Reads the named files, digests them and builds the client context into `out`; false if a
// file cannot be read or the context not built (reported).
bool load_files(toml_checker& check, const toml::table& tls, const std::string& path,
                consumers::consumer_tls& out) {
  // The digest is taken before the context is built: a file replaced in between shows as a
  // change at the next reload, never as a context the digest does not describe.
  std::string all = out.files.server_name;
  const std::pair<const char*, const fs::path*> files[] = {{"ca", &out.files.ca},
                                                           {"cert", &out.files.cert},
                                                           {"key", &out.files.key},
                                                           {"crl", &out.files.crl}};
  for (const auto& [key_name, file] : files) {
    const auto* node = tls.get(key_name);
    if (!node) continue;
    auto bytes = contents(check, *node, path + "." + key_name, *file);
    if (!bytes) return false;
    all += '\0';
    all += *bytes;
  }
  out.digest = sha256_hex(all);
  auto built = net::make_tls_client_context(out.files);
  if (!built.context) {
    check.error(tls, path + ": " + built.error);
    return false;
  }
  out.context = std::move(built.context);
  out.expiry = std::move(built.expiry);
  out.crls = std::move(built.crls);
  return true;
}

}  // namespace

std::optional<consumers::consumer_tls> read_consumer_tls(
    toml_checker& check, const toml::table& consumer, const std::string& consumer_path,
    const fs::path& base, const credentials& creds, const std::string& endpoint_host) {
  const auto* tls = check.table(consumer, consumer_path, "tls");
  if (!tls) return std::nullopt;
  const std::string path = consumer_path + ".tls";
  check.reject_unknown_keys(
      *tls, path, {"ca", "server_name", "cert", "key", "ktls", "crl", "allow_readable_key"});
  consumers::consumer_tls out;
  out.line = tls->source().begin.line;
  out.column = tls->source().begin.column;
  if (!read_names(check, *tls, path, base, creds, endpoint_host, out)) return std::nullopt;
  if (!creds.readable && (creds.holds(out.files.ca) || creds.holds(out.files.cert) ||
                          creds.holds(out.files.key) || creds.holds(out.files.crl))) {
    return out;  // checked as far as names go; the running gateway holds the files
  }
  if (!out.files.key.empty() && !out.allow_readable_key) {
    if (auto why = key_file_problem(out.files.key, creds)) {
      check.error(*tls->get("key"), path + ".key: " + *why);
      return std::nullopt;
    }
  }
  if (!load_files(check, *tls, path, out)) return std::nullopt;
  return out;
}

}  // namespace gatewayd::config
