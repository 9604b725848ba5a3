// gateway-peer's TLS flags and the OpenSSL contexts they make: the sender is a TLS client of the
// gateway's supplier listener, the receiver a TLS server the gateway's consumer leg dials.
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <string>

namespace gatewayd::tools {

struct tls_options {
  std::string ca;           // send: the CA that signed the gateway's certificate
  std::string cert, key;    // send: the client certificate (mTLS); recv: the server's own
  std::string server_name;  // send: SNI and the name the gateway's certificate must carry
  std::string client_ca;    // recv: require a client certificate that this CA signed
  bool enabled() const noexcept { return !ca.empty() || !cert.empty(); }
};

// Takes `flag` and its `value` if it is one of the TLS flags; false if it is not.
bool parse_tls_flag(tls_options& o, const std::string& flag, const std::string& value);

struct ssl_ctx_free {
  void operator()(SSL_CTX* c) const noexcept { SSL_CTX_free(c); }
};
using ssl_ctx_ptr = std::unique_ptr<SSL_CTX, ssl_ctx_free>;

// The sender's and the receiver's context (TLS 1.2 or later, read-ahead on: fewer, bigger
// reads), or null with `error` naming the file and OpenSSL's reason.
ssl_ctx_ptr make_tls_client(const tls_options& o, std::string& error);
ssl_ctx_ptr make_tls_server(const tls_options& o, std::string& error);

}  // namespace gatewayd::tools
