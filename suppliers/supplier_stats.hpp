// Counters of the supplier side, updated once per read (not per frame) and read at scrape time.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>

#include "net/tls_channel.hpp"
#include "net/tls_context.hpp"
#include "protocol/frame_codec.hpp"
#include "routing/publish_drop_counters.hpp"
#include "runtime/enum_names.hpp"

namespace gatewayd::suppliers {

// Why a supplier connection was refused or closed by the gateway (not by the peer).
// proxy_header: a proxy_from source sent no valid PROXY v2 header in time.
enum class close_reason : std::uint8_t {
  connection_limit,
  not_allowed,
  idle_timeout,
  proxy_header,
  partial_frame_budget
};
inline constexpr runtime::enum_names<close_reason, 5> close_reason_names{
    {"connection_limit", "not_allowed", "idle_timeout", "proxy_header", "partial_frame_budget"}};
inline constexpr std::size_t close_reason_count = close_reason_names.count;
inline std::string_view to_string(close_reason r) noexcept {
  return close_reason_names(r);
}

struct supplier_stats {
  std::atomic<std::int64_t> connections{0};
  std::atomic<std::uint64_t> accepted{0};
  std::atomic<std::uint64_t> frames_received{0};
  std::atomic<std::uint64_t> bytes_received{0};
  std::atomic<std::uint64_t> unroutable{0};
  // Frames dropped because their supplier may not publish to their address (routes.toml), by
  // the rule that refused them: every version of the permissions counts into this one.
  const std::shared_ptr<routing::publish_drop_counters> not_permitted =
      std::make_shared<routing::publish_drop_counters>();
  std::atomic<std::uint64_t> backpressure_pauses{0};
  std::array<std::atomic<std::uint64_t>, protocol::frame_error_count> protocol_errors{};
  std::array<std::atomic<std::uint64_t>, close_reason_count> closed{};
  // TLS handshakes that failed, by reason (net::tls_failure).
  std::array<std::atomic<std::uint64_t>, net::tls_failure_count> tls_failures{};
  std::atomic<std::uint64_t> tls_handshakes{0};  // completed
  // Established TLS connections that ended other than by close_notify, by reason.
  std::array<std::atomic<std::uint64_t>, net::tls_error_count> tls_errors{};
  // Open TLS connections by who seals and opens their records (net::tls_records).
  std::array<std::atomic<std::int64_t>, net::tls_records_count> tls_connections{};
};

// One session's share of the above, for /connz: added to where the session adds to
// supplier_stats (once per read), read by other threads.
struct session_stats {
  const std::chrono::system_clock::time_point since = std::chrono::system_clock::now();
  std::atomic<std::uint64_t> frames{0};
  std::atomic<std::uint64_t> bytes{0};
  // 0: plaintext, or TLS not yet handshaken; else 1 + the net::tls_records of the connection.
  std::atomic<std::uint8_t> tls_records{0};
};

}  // namespace gatewayd::suppliers
