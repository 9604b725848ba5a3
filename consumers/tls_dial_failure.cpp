#include "consumers/tls_dial_failure.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <asio/ssl.hpp>

#include "net/tls_context.hpp"

namespace gatewayd::consumers {

bool tls_alert_from_peer(std::error_code ec) noexcept {
  if (ec.category() != asio::error::get_ssl_category()) return false;
  // OpenSSL reports a received alert as reason SSL_AD_REASON_OFFSET + the alert's code.
  return ERR_GET_REASON(static_cast<unsigned long>(ec.value())) >= SSL_AD_REASON_OFFSET;
}

tls_dial_failure classify_tls_dial(std::error_code ec, long verify_result, bool timed_out,
                                   const std::string& server_name,
                                   std::chrono::milliseconds bound) {
  if (timed_out) {
    return {connect_failure::tls_timeout, "TLS handshake timed out after " +
                                              std::to_string(bound.count()) +
                                              " ms (is it speaking TLS?)"};
  }
  if (verify_result == X509_V_ERR_HOSTNAME_MISMATCH ||
      verify_result == X509_V_ERR_IP_ADDRESS_MISMATCH) {
    return {connect_failure::tls_wrong_name,
            "its certificate does not carry the name " + server_name + " (tls.server_name)"};
  }
  const std::string detail =
      verify_result != X509_V_OK ? X509_verify_cert_error_string(verify_result) : ec.message();
  if (verify_result == X509_V_OK && tls_alert_from_peer(ec)) {
    return {connect_failure::tls_rejected,
            "it refused the TLS handshake (" + detail + "; does it want a client certificate?)"};
  }
  switch (net::classify_tls_failure(ec, verify_result)) {
    case net::tls_failure::timeout:
      return {connect_failure::tls_timeout, "TLS handshake timed out (is it speaking TLS?)"};
    case net::tls_failure::not_tls:
      return {connect_failure::tls_not_tls, "it does not speak TLS (" + detail + ")"};
    case net::tls_failure::unknown_ca:
      return {connect_failure::tls_unknown_ca,
              "its certificate is not signed by tls.ca (" + detail + ")"};
    case net::tls_failure::expired:
      return {connect_failure::tls_expired, "its certificate is not valid now (" + detail + ")"};
    case net::tls_failure::no_certificate:
    case net::tls_failure::bad_certificate:
      return {connect_failure::tls_bad_certificate, "its certificate was refused (" + detail + ")"};
    case net::tls_failure::closed:
      return {connect_failure::tls_protocol,
              "it closed the connection during the TLS handshake (is it speaking TLS?)"};
    case net::tls_failure::protocol:
      break;
  }
  return {connect_failure::tls_protocol, "TLS handshake failed (" + detail + ")"};
}

}  // namespace gatewayd::consumers
