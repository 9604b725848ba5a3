#include "net/tls_crl.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <memory>

namespace gatewayd::net {
namespace {

struct bio_free {
  void operator()(BIO* b) const noexcept { BIO_free(b); }
};
struct crl_free {
  void operator()(X509_CRL* c) const noexcept { X509_CRL_free(c); }
};
struct store_ctx_free {
  void operator()(X509_STORE_CTX* c) const noexcept { X509_STORE_CTX_free(c); }
};
using crl_ptr = std::unique_ptr<X509_CRL, crl_free>;

std::string one_line(const X509_NAME* name) {
  char buf[256];
  X509_NAME_oneline(name, buf, sizeof buf);
  return buf;
}

// The CA certificates `store` holds (the client_ca bundle).
std::vector<X509*> store_cas(X509_STORE* store) {
  std::vector<X509*> cas;
  STACK_OF(X509_OBJECT)* objects = X509_STORE_get0_objects(store);
  for (int i = 0; i < sk_X509_OBJECT_num(objects); ++i) {
    if (X509* c = X509_OBJECT_get0_X509(sk_X509_OBJECT_value(objects, i))) cas.push_back(c);
  }
  return cas;
}

// Every CRL of the PEM file, or why not: a file that cannot be read or holds anything but
// whole PEM CRLs (a truncated one, a certificate by mistake) is refused whole.
std::string read_crls(const std::filesystem::path& file, std::vector<crl_ptr>& out) {
  ERR_clear_error();
  std::unique_ptr<BIO, bio_free> in(BIO_new_file(file.c_str(), "r"));
  if (!in) {
    const unsigned long e = ERR_peek_error();
    ERR_clear_error();
    return ERR_SYSTEM_ERROR(e) ? std::strerror(ERR_GET_REASON(e)) : "cannot open the file";
  }
  while (X509_CRL* crl = PEM_read_bio_X509_CRL(in.get(), nullptr, nullptr, nullptr))
    out.emplace_back(crl);
  // The loop ends with "no start line" at the end of the file; any other error is a bad CRL.
  const unsigned long e = ERR_peek_last_error();
  ERR_clear_error();
  const bool at_end = ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE;
  if (!at_end) {
    const char* r = ERR_reason_error_string(e);
    return std::string("not a PEM CRL file (") + (r ? r : "unreadable") + ")";
  }
  if (out.empty()) return "holds no PEM CRL (\"-----BEGIN X509 CRL-----\")";
  return {};
}

double unix_time(const ASN1_TIME* t) {
  std::tm tm{};
  if (!t || ASN1_TIME_to_tm(t, &tm) != 1) return 0;
  return static_cast<double>(timegm(&tm));
}

// The CA of `cas` that signed `crl`, checked with OpenSSL; null when none did.
X509* signer_of(X509_CRL* crl, const std::vector<X509*>& cas) {
  for (X509* ca : cas) {
    if (X509_NAME_cmp(X509_get_subject_name(ca), X509_CRL_get_issuer(crl)) != 0) continue;
    EVP_PKEY* key = X509_get0_pubkey(ca);
    if (key && X509_CRL_verify(crl, key) == 1) return ca;
  }
  ERR_clear_error();
  return nullptr;
}

}  // namespace

std::string load_crl(SSL_CTX* native, const std::filesystem::path& crl,
                     std::vector<tls_crl_update>& crls, std::string& scope) {
  std::vector<crl_ptr> read;
  if (auto why = read_crls(crl, read); !why.empty()) return crl.string() + ": " + why;
  X509_STORE* store = SSL_CTX_get_cert_store(native);
  const auto cas = store_cas(store);
  std::vector<const X509*> covered;
  for (const auto& c : read) {
    X509* ca = signer_of(c.get(), cas);
    if (!ca) {
      return crl.string() + ": the CRL of " + one_line(X509_CRL_get_issuer(c.get())) +
             " is not signed by a CA of the bundle it goes with";
    }
    covered.push_back(ca);
    crls.push_back({crl.string(), one_line(X509_CRL_get_issuer(c.get())),
                    unix_time(X509_CRL_get0_nextUpdate(c.get()))});
    if (X509_STORE_add_crl(store, c.get()) != 1) {
      ERR_clear_error();  // the same CRL twice in the file: one is enough
    }
  }
  // The peer's own certificate is always checked, so its issuer's CRL must be there (OpenSSL
  // refuses a peer whose issuer has none). The whole chain only when every CA has its CRL:
  // checking a CA without one would refuse every peer under it.
  std::string missing;
  for (X509* ca : cas) {
    if (std::find(covered.begin(), covered.end(), ca) == covered.end())
      missing += (missing.empty() ? "" : ", ") + one_line(X509_get_subject_name(ca));
  }
  unsigned long flags = X509_V_FLAG_CRL_CHECK;
  if (missing.empty()) {
    flags |= X509_V_FLAG_CRL_CHECK_ALL;
    scope = "every certificate of the chain is checked";
  } else {
    scope = "only the peer's own certificate is checked (no CRL for " + missing + ")";
  }
  X509_STORE_set_flags(store, flags);
  return {};
}

int tolerate_stale_crl(int ok, X509_STORE_CTX* store) noexcept {
  if (!ok && X509_STORE_CTX_get_error(store) == X509_V_ERR_CRL_HAS_EXPIRED) {
    X509_STORE_CTX_set_error(store, X509_V_OK);
    return 1;
  }
  return ok;
}

bool tls_peer_revoked(SSL* ssl, SSL_CTX* against) {
  X509* peer = SSL_get0_peer_certificate(ssl);
  if (!peer) return false;
  std::unique_ptr<X509_STORE_CTX, store_ctx_free> check(X509_STORE_CTX_new());
  if (!check) return false;
  // The chain the peer sent (a server's list leaves its own certificate out).
  STACK_OF(X509)* chain = SSL_get_peer_cert_chain(ssl);
  if (X509_STORE_CTX_init(check.get(), SSL_CTX_get_cert_store(against), peer, chain) != 1) {
    ERR_clear_error();
    return false;
  }
  X509_STORE_CTX_set_default(check.get(), "ssl_client");
  X509_STORE_CTX_set_verify_cb(check.get(), tolerate_stale_crl);
  const bool valid = X509_verify_cert(check.get()) == 1;
  const int error = X509_STORE_CTX_get_error(check.get());
  ERR_clear_error();
  return !valid && error == X509_V_ERR_CERT_REVOKED;
}

}  // namespace gatewayd::net
