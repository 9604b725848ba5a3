// Builds the TLS contexts (the supplier listener's, each TLS consumer's) from the operator's PEM
// files, validating them first: a context exists only for a certificate and key that match, and
// a CA bundle that loads. The same code serves start-up, reloads and `gatewayd --check`, so what
// --check accepts the daemon accepts. Modern defaults only: TLS 1.2 or later, no renegotiation,
// no session tickets (no ticket key to rotate or leak), peer verification when a CA is set.
#pragma once

#include <asio/ssl.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "net/tls_files.hpp"

namespace gatewayd::net {

// One loaded certificate, for the expiry metric.
struct tls_certificate_expiry {
  std::string file;      // as the operator named it (absolute)
  double not_after = 0;  // Unix seconds
};

// One loaded certificate revocation list, for the nextUpdate metric and warning.
struct tls_crl_update {
  std::string file;        // as the operator named it (absolute)
  std::string issuer;      // the CA that signed it, one line
  double next_update = 0;  // Unix seconds; 0 when the CRL has none
};

struct tls_server_context {
  std::shared_ptr<asio::ssl::context> context;  // null when error is set
  std::string error;                            // "FILE: reason"
  std::vector<tls_certificate_expiry> expiry;   // the leaf certificate and the CA bundle's
  std::vector<tls_crl_update> crls;             // the `crl` file's, one per CRL in it
  // With a `crl`: what is checked, for the log ("every certificate of the chain", or only the
  // peer's own and why). Empty without.
  std::string crl_scope;
};

// Loads and checks `files`; never throws.
tls_server_context make_tls_server_context(const tls_server_files& files);

// A consumer connection's context: verifies the consumer's certificate against `files.ca` (always)
// and presents `files.cert` when it is set. `files.server_name` is checked per connection
// (prepare_tls_client). Same shape as the server's: the context, or the error, and the expiry.
using tls_client_context = tls_server_context;
tls_client_context make_tls_client_context(const tls_client_files& files);

// Before a client handshake: sends `server_name` as SNI (unless it is an IP address, which SNI
// cannot carry) and makes the certificate check require that name as a subjectAltName (a DNS
// name or an IP address SAN; the subject CN is never read). Empty when done, else why not.
std::string prepare_tls_client(SSL* ssl, const std::string& server_name);

// The context new connections use, replaced whole by a reload (after it was built and
// validated); connections hold the one they started with. Any thread may load or store.
class tls_context_holder {
 public:
  std::shared_ptr<asio::ssl::context> load() const {
    std::lock_guard lock(mutex_);
    return context_;
  }
  std::vector<tls_certificate_expiry> expiry() const {
    std::lock_guard lock(mutex_);
    return expiry_;
  }
  std::vector<tls_crl_update> crls() const {
    std::lock_guard lock(mutex_);
    return crls_;
  }
  void store(tls_server_context built) {
    std::lock_guard lock(mutex_);
    context_ = std::move(built.context);
    expiry_ = std::move(built.expiry);
    crls_ = std::move(built.crls);
  }

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<asio::ssl::context> context_;
  std::vector<tls_certificate_expiry> expiry_;
  std::vector<tls_crl_update> crls_;
};

// Why a supplier's handshake failed, as a metric label.
enum class tls_failure : std::uint8_t {
  timeout,          // no complete handshake within the deadline
  not_tls,          // the peer spoke something else (plaintext GWP/1, HTTP, ...)
  no_certificate,   // client_ca is set and the peer presented none
  unknown_ca,       // the peer's certificate does not chain to client_ca
  expired,          // the peer's certificate is expired or not yet valid
  bad_certificate,  // any other verification failure
  protocol,         // version or cipher mismatch, bad record, alert from the peer
  closed,           // the peer left during the handshake
  revoked,          // the peer's certificate (or a CA above it) is listed in the `crl` file
};
inline constexpr std::size_t tls_failure_count = 9;
std::string_view to_string(tls_failure f) noexcept;

// Classifies a failed handshake from its error and the verification result of its SSL.
tls_failure classify_tls_failure(const std::error_code& ec, long verify_result) noexcept;

// The identity a verified peer certificate carries: its subject CN, else its first SAN DNS
// name; empty when there is none (or no certificate).
std::string tls_peer_identity(SSL* ssl);

}  // namespace gatewayd::net
