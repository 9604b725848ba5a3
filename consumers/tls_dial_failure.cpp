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

namespace {

// The alert description `ec` carries, or -1 when it is not an alert from the peer.
int alert_of(std::error_code ec) noexcept {
  if (!tls_alert_from_peer(ec)) return -1;
  return ERR_GET_REASON(static_cast<unsigned long>(ec.value())) - SSL_AD_REASON_OFFSET;
}

}  // namespace

bool tls_certificate_alert(std::error_code ec) noexcept {
  switch (alert_of(ec)) {
    case SSL_AD_BAD_CERTIFICATE:
    case SSL_AD_UNSUPPORTED_CERTIFICATE:
    case SSL_AD_CERTIFICATE_REVOKED:
    case SSL_AD_CERTIFICATE_EXPIRED:
    case SSL_AD_CERTIFICATE_UNKNOWN:
    case SSL_AD_UNKNOWN_CA:
    case SSL_AD_ACCESS_DENIED:
    case SSL_AD_CERTIFICATE_REQUIRED:
      return true;
    default:
      return false;
  }
}

tls_dial_failure classify_tls_dial(std::error_code ec, long verify_result, bool timed_out,
                                   const std::string& server_name, std::chrono::milliseconds bound,
                                   bool certificate_seen) {
  if (timed_out) {
    return {connect_failure::tls_timeout, "TLS handshake timed out after " +
                                              std::to_string(bound.count()) +
                                              " ms (is it speaking TLS?)"};
  }
  if (verify_result == X509_V_ERR_HOSTNAME_MISMATCH ||
      verify_result == X509_V_ERR_IP_ADDRESS_MISMATCH) {
    return {connect_failure::tls_wrong_name,
            "its certificate does not carry the name " + server_name +
                " as a subjectAltName (tls.server_name; its subject CN is not checked)"};
  }
  const std::string detail =
      verify_result != X509_V_OK ? X509_verify_cert_error_string(verify_result) : ec.message();
  if (verify_result == X509_V_OK && tls_alert_from_peer(ec)) {
    // Under TLS 1.2 a server that wants a client certificate and got none says handshake_failure
    // (certificate_required is TLS 1.3's): after its own certificate, that is what it means.
    const int alert = alert_of(ec);
    if (tls_certificate_alert(ec) || (alert == SSL_AD_HANDSHAKE_FAILURE && certificate_seen)) {
      return {connect_failure::tls_rejected,
              "it refused the TLS handshake (" + detail + "; does it want a client certificate?)"};
    }
    if (alert == SSL_AD_PROTOCOL_VERSION) {
      return {connect_failure::tls_protocol,
              "it refused our TLS versions, 1.2 and 1.3 (" + detail + ")"};
    }
    if (alert == SSL_AD_HANDSHAKE_FAILURE || alert == SSL_AD_INSUFFICIENT_SECURITY) {
      return {connect_failure::tls_protocol,
              "it refused our TLS versions or cipher suites: no suite in common? We offer AEAD "
              "suites with forward secrecy only (" +
                  detail + ")"};
    }
    return {connect_failure::tls_protocol, "it ended the TLS handshake (" + detail + ")"};
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
    case net::tls_failure::revoked:
      return {connect_failure::tls_bad_certificate,
              "its certificate is revoked by tls.crl (" + detail + ")"};
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
