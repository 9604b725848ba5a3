#include "net/tls_context.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "net/tls_crl.hpp"

namespace gatewayd::net {
namespace {

constexpr std::array<std::string_view, tls_failure_count> failure_names{
    "timeout",         "not_tls",  "no_certificate", "unknown_ca", "expired",
    "bad_certificate", "protocol", "closed",         "revoked"};

// The oldest error OpenSSL queued (the one that says what went wrong first), then clears the
// queue so the next operation starts clean.
std::string openssl_reason(std::string_view fallback) {
  const unsigned long e = ERR_peek_error();
  std::string reason;
  if (e != 0 && ERR_SYSTEM_ERROR(e)) {
    // A file OpenSSL could not open: the errno it packed (EACCES, ENOENT), said as such.
    reason = std::strerror(ERR_GET_REASON(e));
  } else if (e != 0) {
    const char* r = ERR_reason_error_string(e);
    reason = r ? r : "error " + std::to_string(e);
  } else {
    reason = fallback;
  }
  ERR_clear_error();
  return reason;
}

// The notAfter of every certificate in a PEM file, in Unix seconds.
bool read_expiry(const std::filesystem::path& file, std::vector<tls_certificate_expiry>& out) {
  std::FILE* f = std::fopen(file.c_str(), "r");
  if (!f) return false;
  bool any = false;
  while (X509* cert = PEM_read_X509(f, nullptr, nullptr, nullptr)) {
    std::tm tm{};
    if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) == 1) {
      out.push_back({file.string(), static_cast<double>(timegm(&tm))});
      any = true;
    }
    X509_free(cert);
    // A chain file: the expiry that matters first is the leaf's, but every one is shown.
  }
  ERR_clear_error();  // PEM_read_X509 ends with "no start line" at the end of the file
  std::fclose(f);
  return any;
}

// Mozilla's "intermediate" suites: AEAD with forward secrecy only (no CBC, no RSA key
// exchange in TLS 1.2), AES-128-GCM first, as Go's crypto/tls and BoringSSL order it on
// machines with AES instructions: the bulk cipher is the largest cost of a TLS frame
// (docs/benchmarks-tls.md), and AES-128-GCM is the cheaper one (5 % here, 4.3 against 4.1 GB/s
// in `openssl speed -evp` at 16 KiB; more on CPUs without VAES). A peer that offers only
// AES-256 still gets it.
constexpr const char* tls13_suites =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
constexpr const char* tls12_suites =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
    "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384";

// Modern defaults for both sides: TLS 1.2 or later, the suites above, no renegotiation, no
// compression, no tickets, no session cache.
std::shared_ptr<asio::ssl::context> modern_context(asio::ssl::context::method method) {
  auto ctx = std::make_shared<asio::ssl::context>(method);
  SSL_CTX* native = ctx->native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_ciphersuites(native, tls13_suites);
  SSL_CTX_set_cipher_list(native, tls12_suites);
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET | SSL_OP_NO_COMPRESSION);
  SSL_CTX_set_num_tickets(native, 0);  // TLS 1.3: no tickets either
  SSL_CTX_set_session_cache_mode(native, SSL_SESS_CACHE_OFF);
  return ctx;
}

// Loads a certificate chain and its key into `native`; empty, or "FILE: reason".
std::string load_key_pair(SSL_CTX* native, const std::filesystem::path& cert,
                          const std::filesystem::path& key) {
  if (SSL_CTX_use_certificate_chain_file(native, cert.c_str()) != 1) {
    return cert.string() + ": " + openssl_reason("cannot load the certificate chain");
  }
  const auto mismatch = [] {
    const unsigned long e = ERR_peek_error();
    return ERR_GET_LIB(e) == ERR_LIB_X509 && ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH;
  };
  if (SSL_CTX_use_PrivateKey_file(native, key.c_str(), SSL_FILETYPE_PEM) != 1 && !mismatch()) {
    return key.string() + ": " + openssl_reason("cannot load the private key");
  }
  if (mismatch() || SSL_CTX_check_private_key(native) != 1) {
    return key.string() + ": does not match the certificate in " + cert.string() + " (" +
           openssl_reason("key values mismatch") + ")";
  }
  return {};
}

// Loads a CA bundle to verify peers against; empty, or "FILE: reason".
std::string load_ca(SSL_CTX* native, const std::filesystem::path& ca,
                    std::vector<tls_certificate_expiry>& expiry) {
  if (SSL_CTX_load_verify_locations(native, ca.c_str(), nullptr) != 1) {
    return ca.string() + ": " + openssl_reason("cannot load the CA bundle");
  }
  if (!read_expiry(ca, expiry)) return ca.string() + ": holds no PEM certificate";
  return {};
}

}  // namespace

std::string_view to_string(tls_failure f) noexcept {
  return failure_names[static_cast<std::size_t>(f)];
}

tls_server_context make_tls_server_context(const tls_server_files& files) {
  tls_server_context out;
  ERR_clear_error();
  auto ctx = modern_context(asio::ssl::context::tls_server);
  SSL_CTX* native = ctx->native_handle();
  SSL_CTX_set_options(native, SSL_OP_CIPHER_SERVER_PREFERENCE);
  out.error = load_key_pair(native, files.cert, files.key);
  if (!out.error.empty()) return out;
  read_expiry(files.cert, out.expiry);
  if (!files.client_ca.empty()) {
    out.error = load_ca(native, files.client_ca, out.expiry);
    if (!out.error.empty()) {
      out.expiry.clear();
      return out;
    }
    // Suppliers must present a certificate that client_ca signed (and, with a crl, that its
    // CA has not revoked).
    if (!files.crl.empty()) out.error = load_crl(native, files.crl, out.crls, out.crl_scope);
    if (!out.error.empty()) {
      out.expiry.clear();
      out.crls.clear();
      return out;
    }
    SSL_CTX_set_verify(native, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                       files.crl.empty() ? nullptr : tolerate_stale_crl);
  }
  out.context = std::move(ctx);
  return out;
}

tls_client_context make_tls_client_context(const tls_client_files& files) {
  tls_client_context out;
  ERR_clear_error();
  auto ctx = modern_context(asio::ssl::context::tls_client);
  SSL_CTX* native = ctx->native_handle();
  out.error = load_ca(native, files.ca, out.expiry);
  if (out.error.empty() && !files.crl.empty()) {
    out.error = load_crl(native, files.crl, out.crls, out.crl_scope);
  }
  if (out.error.empty() && !files.cert.empty()) {
    out.error = load_key_pair(native, files.cert, files.key);
    if (out.error.empty()) read_expiry(files.cert, out.expiry);
  }
  if (!out.error.empty()) {
    out.expiry.clear();
    out.crls.clear();
    return out;
  }
  // A consumer's certificate must chain to `ca` (and not be revoked, with a crl); the name is
  // checked per connection.
  SSL_CTX_set_verify(native, SSL_VERIFY_PEER, files.crl.empty() ? nullptr : tolerate_stale_crl);
  out.context = std::move(ctx);
  return out;
}

std::string prepare_tls_client(SSL* ssl, const std::string& server_name) {
  ERR_clear_error();
  std::error_code ec;
  (void)asio::ip::make_address(server_name, ec);
  const bool is_address = !ec;
  if (is_address) {
    // RFC 6066: SNI carries host names only. The certificate must hold the address as an IP SAN.
    if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), server_name.c_str()) != 1) {
      return "cannot verify against address " + server_name + ": " + openssl_reason("bad address");
    }
    return {};
  }
  if (SSL_set_tlsext_host_name(ssl, server_name.c_str()) != 1) {
    return "cannot send server name " + server_name + ": " + openssl_reason("SNI refused");
  }
  // The name must be a DNS subjectAltName: a certificate without one is not matched on its
  // subject CN (RFC 6125 6.4.4; browsers and Go's crypto/tls refuse it as well), so a CN-only
  // certificate some CA signed for another purpose cannot pass for a consumer.
  SSL_set_hostflags(ssl,
                    X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS | X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
  if (SSL_set1_host(ssl, server_name.c_str()) != 1) {
    return "cannot verify against name " + server_name + ": " + openssl_reason("bad name");
  }
  return {};
}

tls_failure classify_tls_failure(const std::error_code& ec, long verify_result) noexcept {
  switch (verify_result) {
    case X509_V_OK:
      break;
    case X509_V_ERR_CERT_HAS_EXPIRED:
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return tls_failure::expired;
    case X509_V_ERR_CERT_REVOKED:
      return tls_failure::revoked;
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
      return tls_failure::unknown_ca;
    default:
      return tls_failure::bad_certificate;
  }
  if (ec == asio::error::eof || ec == asio::ssl::error::stream_truncated ||
      ec == asio::error::connection_reset) {
    return tls_failure::closed;
  }
  if (ec.category() == asio::error::get_ssl_category()) {
    switch (ERR_GET_REASON(static_cast<unsigned long>(ec.value()))) {
      case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
        return tls_failure::no_certificate;
      case SSL_R_WRONG_VERSION_NUMBER:
      case SSL_R_HTTP_REQUEST:
      case SSL_R_HTTPS_PROXY_REQUEST:
      case SSL_R_PACKET_LENGTH_TOO_LONG:
      case SSL_R_RECORD_LENGTH_MISMATCH:
      case SSL_R_UNKNOWN_PROTOCOL:
        return tls_failure::not_tls;
      case SSL_R_CERTIFICATE_VERIFY_FAILED:
        return tls_failure::bad_certificate;
      default:
        break;
    }
  }
  return tls_failure::protocol;
}

std::string tls_peer_identity(SSL* ssl) {
  X509* cert = SSL_get1_peer_certificate(ssl);
  if (!cert) return {};
  std::string identity;
  const X509_NAME* subject = X509_get_subject_name(cert);
  const int at = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (at >= 0) {
    const ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at));
    identity.assign(reinterpret_cast<const char*>(ASN1_STRING_get0_data(data)),
                    static_cast<std::size_t>(ASN1_STRING_length(data)));
  }
  if (identity.empty()) {
    auto* names =
        static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
    for (int i = 0; names && i < sk_GENERAL_NAME_num(names); ++i) {
      const GENERAL_NAME* n = sk_GENERAL_NAME_value(names, i);
      if (n->type != GEN_DNS) continue;
      const ASN1_STRING* dns = n->d.dNSName;
      identity.assign(reinterpret_cast<const char*>(ASN1_STRING_get0_data(dns)),
                      static_cast<std::size_t>(ASN1_STRING_length(dns)));
      break;
    }
    GENERAL_NAMES_free(names);
  }
  X509_free(cert);
  return identity;
}

}  // namespace gatewayd::net
