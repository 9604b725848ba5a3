// The `tls` table of a consumer in routes.toml: file names relative to the routes file, the
// server name's default, the errors (with their positions) and the digest that tells a reload
// that a file's contents changed. Certificates from the openssl CLI, made at run time.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <string>

#include "config/routes_loader.hpp"
#include "config/service_config.hpp"
#include "tests/support/tls_peers.hpp"

using namespace gatewayd;
using namespace gatewayd::test;
namespace fs = std::filesystem;

namespace {

// routes.toml in the pki's folder, with billing's tls table holding `tls`.
config::routes_load_result load(const pki& p, const std::string& tls,
                                const config::credentials& creds = {}) {
  const std::string text = "[consumers.billing]\nendpoint = \"127.0.0.1:7501\"\ntls = { " + tls +
                           " }\n[[routes]]\nmatch = \"orders.>\"\nto = [\"billing\"]\n";
  return config::parse_routes_config(text, p.at("routes.toml").string(), creds);
}

std::string first_error(const config::routes_load_result& r) {
  return r.errors.empty() ? std::string{"(none)"} : r.errors.front().to_string();
}

}  // namespace

BOOST_AUTO_TEST_CASE(file_names_are_relative_to_the_routes_file) {
  pki p;
  const auto r = load(p, R"(ca = "ca.crt", cert = "gateway.crt", key = "gateway.key")");
  BOOST_TEST_REQUIRE(r.config.has_value(), first_error(r));
  const auto& tls = r.config->consumers.front().tls;
  BOOST_TEST_REQUIRE(tls.has_value());
  BOOST_TEST(tls->files.ca == p.at("ca.crt"));
  BOOST_TEST(tls->files.cert == p.at("gateway.crt"));
  // No server_name: the endpoint's host, checked against an IP address SAN.
  BOOST_TEST(tls->files.server_name == "127.0.0.1");
  BOOST_TEST(tls->context != nullptr);
  BOOST_TEST(tls->digest.size() == 64u);
  BOOST_TEST(tls->expiry.size() == 2u);  // the CA and the client certificate
}

BOOST_AUTO_TEST_CASE(the_digest_follows_the_files_contents) {
  pki p;
  const auto before = load(p, R"(ca = "ca.crt", server_name = "billing.internal")");
  BOOST_TEST_REQUIRE(before.config.has_value(), first_error(before));
  const auto again = load(p, R"(ca = "ca.crt", server_name = "billing.internal")");
  BOOST_TEST_REQUIRE(again.config.has_value());
  BOOST_TEST((before.config->consumers == again.config->consumers));
  fs::copy_file(p.at("stranger-ca.crt"), p.at("ca.crt"), fs::copy_options::overwrite_existing);
  const auto rotated = load(p, R"(ca = "ca.crt", server_name = "billing.internal")");
  BOOST_TEST_REQUIRE(rotated.config.has_value());
  BOOST_TEST(!(before.config->consumers == rotated.config->consumers));
}

BOOST_AUTO_TEST_CASE(errors_name_the_table_and_the_reason) {
  pki p;
  const auto half = load(p, R"(ca = "ca.crt", cert = "gateway.crt")");
  BOOST_TEST(first_error(half) == p.at("routes.toml").string() +
                                      ":3:7: consumers.billing.tls: cert and key go together (a "
                                      "client certificate needs its key); key is missing");
  const auto no_ca = load(p, R"(server_name = "billing.internal")");
  BOOST_TEST(first_error(no_ca).find("missing required key \"ca\"") != std::string::npos,
             first_error(no_ca));
  const auto missing = load(p, R"(ca = "nope.crt")");
  BOOST_TEST(first_error(missing).find("cannot read " + p.at("nope.crt").string()) !=
             std::string::npos);
  const auto mismatched = load(p, R"(ca = "ca.crt", cert = "gateway.crt", key = "orders.key")");
  BOOST_TEST(first_error(mismatched).find("does not match the certificate") != std::string::npos);
  const auto not_a_ca = load(p, R"(ca = "gateway.key")");
  BOOST_TEST(!not_a_ca.errors.empty());
  const auto unknown = load(p, R"(ca = "ca.crt", verify = false)");
  BOOST_TEST(first_error(unknown).find("verify") != std::string::npos);
}

// Under systemd the files come through LoadCredential=: named ${CREDENTIALS_DIRECTORY}/..., they
// are read from the directory systemd made (here the pki's own folder stands for it).
BOOST_AUTO_TEST_CASE(file_names_may_start_with_the_credentials_directory) {
  pki p;
  config::credentials creds;
  creds.directory = p.dir.path();
  const std::string tls = R"(ca = "${CREDENTIALS_DIRECTORY}/ca.crt", )"
                          R"(cert = "${CREDENTIALS_DIRECTORY}/gateway.crt", )"
                          R"(key = "${CREDENTIALS_DIRECTORY}/gateway.key")";
  const auto r = load(p, tls, creds);
  BOOST_TEST_REQUIRE(r.config.has_value(), first_error(r));
  const auto& loaded = r.config->consumers.front().tls;
  BOOST_TEST_REQUIRE(loaded.has_value());
  BOOST_TEST(loaded->files.ca == p.at("ca.crt"));
  BOOST_TEST(loaded->files.key == p.at("gateway.key"));
  BOOST_TEST(loaded->context != nullptr);
  BOOST_TEST(loaded->digest.size() == 64u);

  // Unset, each name says what is missing, at its key.
  const auto unset = load(p, tls);
  BOOST_TEST(unset.errors.size() == 3u);
  BOOST_TEST(first_error(unset) ==
             p.at("routes.toml").string() +
                 ":3:14: consumers.billing.tls.ca: \"${CREDENTIALS_DIRECTORY}/ca.crt\" names a "
                 "systemd credential, but CREDENTIALS_DIRECTORY is not set: gatewayd is not "
                 "running under a unit that passes it with LoadCredential= (docs/security.md)");
}

// The unit's ExecReload= check cannot see the credentials (systemd 252 shows them to no
// ExecReload= process): with --skip-credentials the names are checked and the files left alone;
// without it, the same directory is an error naming the file.
BOOST_AUTO_TEST_CASE(skipped_credentials_are_not_read) {
  pki p;
  config::credentials creds;
  creds.directory = p.at("not-there");
  const std::string tls = R"(ca = "${CREDENTIALS_DIRECTORY}/tls_ca.crt", )"
                          R"(server_name = "billing.internal")";
  const auto read = load(p, tls, creds);
  BOOST_TEST(first_error(read).find("cannot read " + p.at("not-there/tls_ca.crt").string()) !=
                 std::string::npos,
             first_error(read));
  creds.readable = false;
  const auto skipped = load(p, tls, creds);
  BOOST_TEST_REQUIRE(skipped.config.has_value(), first_error(skipped));
  const auto& tls_of = skipped.config->consumers.front().tls;
  BOOST_TEST_REQUIRE(tls_of.has_value());
  BOOST_TEST(tls_of->files.ca == p.at("not-there/tls_ca.crt"));
  BOOST_TEST(tls_of->context == nullptr);
  // Files outside the credentials directory are still read and checked.
  const auto outside = load(p, R"(ca = "nope.crt", server_name = "billing.internal")", creds);
  BOOST_TEST(first_error(outside).find("cannot read " + p.at("nope.crt").string()) !=
             std::string::npos);
}
