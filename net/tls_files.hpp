// Which PEM files make a TLS context, as the operator named them: plain data that the
// configuration readers fill in and the context builder (tls_context.hpp) loads.
#pragma once

#include <filesystem>
#include <string>

namespace gatewayd::net {

// The supplier listener's side ([tls] in gatewayd.toml).
struct tls_server_files {
  std::filesystem::path cert;       // PEM: the gateway's certificate, then its chain
  std::filesystem::path key;        // PEM: the private key of that certificate
  std::filesystem::path client_ca;  // PEM bundle; empty = suppliers present no certificate
  std::filesystem::path crl;        // PEM, one or more CRLs of client_ca's CAs; empty = none

  friend bool operator==(const tls_server_files&, const tls_server_files&) = default;
};

// One consumer's side (the `tls` table of [consumers.NAME] in routes.toml).
struct tls_client_files {
  std::filesystem::path ca;    // PEM bundle the consumer's certificate must chain to
  std::string server_name;     // the name its certificate must carry (and the SNI sent)
  std::filesystem::path cert;  // optional, with key: the gateway's client certificate
  std::filesystem::path key;
  std::filesystem::path crl;  // PEM, one or more CRLs of ca's CAs; empty = none

  friend bool operator==(const tls_client_files&, const tls_client_files&) = default;
};

}  // namespace gatewayd::net
