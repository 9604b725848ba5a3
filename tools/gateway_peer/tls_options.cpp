#include "tools/gateway_peer/tls_options.hpp"

#include <openssl/err.h>

#include "tools/gateway_peer/options.hpp"

namespace gatewayd::tools {

namespace {

std::string reason(const std::string& file, const char* fallback) {
  const unsigned long e = ERR_peek_error();
  const char* r = e ? ERR_reason_error_string(e) : nullptr;
  ERR_clear_error();
  return file + ": " + (r ? r : fallback);
}

ssl_ctx_ptr base(const SSL_METHOD* method) {
  ssl_ctx_ptr ctx(SSL_CTX_new(method));
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  // A blocked write is retried with the same bytes, possibly from another buffer position.
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // Nothing here resumes sessions: a server sends no tickets.
  SSL_CTX_set_num_tickets(ctx.get(), 0);
  return ctx;
}

bool use_pair(SSL_CTX* ctx, const tls_options& o, std::string& error) {
  if (SSL_CTX_use_certificate_chain_file(ctx, o.cert.c_str()) != 1) {
    error = reason(o.cert, "cannot load the certificate chain");
    return false;
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, o.key.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(ctx) != 1) {
    error = reason(o.key, "cannot load the key, or it does not match the certificate");
    return false;
  }
  return true;
}

}  // namespace

bool parse_tls_flag(tls_options& o, const std::string& flag, const std::string& value) {
  std::string* field = flag == "--tls-ca"            ? &o.ca
                       : flag == "--tls-cert"        ? &o.cert
                       : flag == "--tls-key"         ? &o.key
                       : flag == "--tls-server-name" ? &o.server_name
                       : flag == "--tls-client-ca"   ? &o.client_ca
                                                     : nullptr;
  if (!field) return false;
  if (value.empty()) throw usage_error(flag + " needs a value");
  *field = value;
  return true;
}

ssl_ctx_ptr make_tls_client(const tls_options& o, std::string& error) {
  ERR_clear_error();
  auto ctx = base(TLS_client_method());
  if (SSL_CTX_load_verify_locations(ctx.get(), o.ca.c_str(), nullptr) != 1) {
    error = reason(o.ca, "cannot load the CA");
    return nullptr;
  }
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  if (!o.cert.empty() && !use_pair(ctx.get(), o, error)) return nullptr;
  return ctx;
}

ssl_ctx_ptr make_tls_server(const tls_options& o, std::string& error) {
  ERR_clear_error();
  auto ctx = base(TLS_server_method());
  if (!use_pair(ctx.get(), o, error)) return nullptr;
  if (!o.client_ca.empty()) {
    if (SSL_CTX_load_verify_locations(ctx.get(), o.client_ca.c_str(), nullptr) != 1) {
      error = reason(o.client_ca, "cannot load the CA");
      return nullptr;
    }
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  return ctx;
}

}  // namespace gatewayd::tools
