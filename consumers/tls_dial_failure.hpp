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
// link's deadline ended it, after `bound`.
tls_dial_failure classify_tls_dial(std::error_code ec, long verify_result, bool timed_out,
                                   const std::string& server_name, std::chrono::milliseconds bound);

// True when `ec` is a TLS alert the consumer sent: under TLS 1.3 a server judges the client's
// certificate after the client's handshake completed, so a refusal arrives on the first read.
bool tls_alert_from_peer(std::error_code ec) noexcept;

}  // namespace gatewayd::consumers
