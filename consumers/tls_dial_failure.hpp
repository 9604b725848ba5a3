// Why a TLS consumer's handshake failed, as a connect_failure reason and one sentence for the log
// that tells the operator what to look at.
#pragma once

#include <chrono>
#include <string>
#include <system_error>

#include "consumers/consumer_stats.hpp"

namespace gatewayd::consumers {

struct tls_dial_failure {
  connect_failure reason = connect_failure::tls_protocol;
  std::string why;  // "its certificate does not carry the name billing.internal (...)"
};

// `ec` and `verify_result` (SSL_get_verify_result) of the failed handshake; `timed_out` when the
// link's deadline ended it, after `bound`; `certificate_seen` when the consumer's certificate had
// arrived (the negotiation of version and suite was over), so a handshake_failure alert after it
// is about our certificate, not about what we offered. An alert about our certificate (or its
// absence) is tls_rejected; one that refuses our versions or suites is tls_protocol.
tls_dial_failure classify_tls_dial(std::error_code ec, long verify_result, bool timed_out,
                                   const std::string& server_name, std::chrono::milliseconds bound,
                                   bool certificate_seen = false);

// True when `ec` is a TLS alert the consumer sent: under TLS 1.3 a server judges the client's
// certificate after the client's handshake completed, so a refusal arrives on the first read.
bool tls_alert_from_peer(std::error_code ec) noexcept;
// True when it is one of the alerts a server sends about the client's certificate
// (bad_certificate ... access_denied, certificate_required).
bool tls_certificate_alert(std::error_code ec) noexcept;

}  // namespace gatewayd::consumers
