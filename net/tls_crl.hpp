// Certificate revocation lists for a TLS context: loads a PEM file of CRLs into the context's
// store and turns OpenSSL's CRL checking on, and checks an open connection's peer again.
#pragma once

#include <openssl/ssl.h>

#include <filesystem>
#include <string>
#include <vector>

#include "net/tls_context.hpp"

namespace gatewayd::net {

// Loads every CRL of `crl` (PEM, one or more) into `native`'s store, after checking that each
// was signed by a CA the store holds (so a wrong file fails here, not at every handshake), and
// sets X509_V_FLAG_CRL_CHECK, with X509_V_FLAG_CRL_CHECK_ALL when every CA of the store has its
// CRL in the file. Call after the CA bundle is loaded. Empty, or "FILE: reason".
std::string load_crl(SSL_CTX* native, const std::filesystem::path& crl,
                     std::vector<tls_crl_update>& crls, std::string& scope);

// The verify callback of a context with CRLs: a CRL past its nextUpdate is still used (what it
// revokes stays revoked) instead of failing every handshake; the gauge and a warning say so.
int tolerate_stale_crl(int ok, X509_STORE_CTX* store) noexcept;

// True when the certificate `ssl`'s peer presented at its handshake is revoked by the CRLs of
// `against` (a context built since, e.g. by a reload): OpenSSL verifies it again with that
// context's store, and only a revocation counts (not a CA the new context lacks). Call it where
// `ssl` is used (its connection's strand), once its handshake is done.
bool tls_peer_revoked(SSL* ssl, SSL_CTX* against);

}  // namespace gatewayd::net
