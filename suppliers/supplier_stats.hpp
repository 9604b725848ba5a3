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
#include "protocol/confirm_ledger.hpp"
#include "protocol/control_message.hpp"
#include "protocol/frame_codec.hpp"
#include "routing/publish_drop_counters.hpp"
#include "runtime/byte_budget.hpp"
#include "runtime/enum_names.hpp"

namespace gatewayd::suppliers {

// Where a supplier connection is: supplier_session's states (its header lists the transitions),
// here so that the sessions in each can be counted for /metrics.
enum class session_state : std::uint8_t {
  handshaking,  // TLS: before the first read, under the handshake deadline
  reading,      // waiting for readability, or reading and routing
  paused,       // a consumer asked it to stop reading: its resume_reading() ends it
  held,         // paused by the gateway itself (drain): only a close ends it
  departing,    // the peer left while paused: reading to its end, never pausing again
  confirming,   // waits for confirms: its own max_unconfirmed_frames
  closed,
};
inline constexpr runtime::enum_names<session_state, 7> session_state_names{
    {"handshaking", "reading", "paused", "held", "departing", "confirming", "closed"}};
inline constexpr std::size_t session_state_count = session_state_names.count;
inline std::string_view to_string(session_state s) noexcept {
  return session_state_names(s);
}

// Why a supplier connection was refused or closed by the gateway (not by the peer).
// proxy_header: a proxy_from source sent no valid PROXY v2 header in time. reclaimed: at
// max_supplier_connections, the session that had waited longest for a stalled backpressure
// consumer gave its place to a new connection. confirms_unread: a supplier that asked for
// confirms left them unread (the gateway's small buffer of them full) for confirm_timeout_ms.
// handshake_evicted: at max_handshaking_connections, the connection longest in its TLS handshake
// or PROXY header gave its slot to a new connection. revoked: a reload's [tls] crl revokes the
// certificate the supplier presented at its handshake.
enum class close_reason : std::uint8_t {
  connection_limit,
  not_allowed,
  idle_timeout,
  proxy_header,
  partial_frame_budget,
  reclaimed,
  confirms_unread,
  handshake_evicted,
  revoked
};
inline constexpr runtime::enum_names<close_reason, 9> close_reason_names{
    {"connection_limit", "not_allowed", "idle_timeout", "proxy_header", "partial_frame_budget",
     "reclaimed", "confirms_unread", "handshake_evicted", "revoked"}};
inline constexpr std::size_t close_reason_count = close_reason_names.count;
inline std::string_view to_string(close_reason r) noexcept {
  return close_reason_names(r);
}

// Why a frame a supplier connection had received only in part was thrown away: how the
// connection ended. The names are the metric's `reason` label. (What follows a malformed frame
// is not a frame: a protocol error counts it, not this.)
enum class partial_discard : std::uint8_t {
  peer_closed,           // the supplier closed or reset its connection mid-frame
  idle_timeout,          // no whole frame for idle_timeout_ms (a trickle)
  partial_frame_budget,  // the frame could not grow within max_partial_frame_bytes
  not_allowed,           // a reload expelled the supplier (allow list, or certificate revoked)
  reclaimed,             // the connection cap gave its place to a new connection
  shutdown,              // the gateway stopped
  tls_error,             // its TLS connection failed (gatewayd_tls_errors_total says why)
  confirms_unread,       // it left its confirms unread for confirm_timeout_ms
};
inline constexpr runtime::enum_names<partial_discard, 8> partial_discard_names{
    {"peer_closed", "idle_timeout", "partial_frame_budget", "not_allowed", "reclaimed", "shutdown",
     "tls_error", "confirms_unread"}};
inline constexpr std::size_t partial_discard_count = partial_discard_names.count;
inline std::string_view to_string(partial_discard r) noexcept {
  return partial_discard_names(r);
}

struct supplier_stats {
  std::atomic<std::int64_t> connections{0};
  // Open sessions by state (index: session_state; closed ones are not counted).
  std::array<std::atomic<std::int64_t>, session_state_count> sessions{};
  // Connections in their TLS handshake or PROXY header now (session_registry keeps it).
  std::atomic<std::int64_t> handshaking{0};
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
  // Frames received only in part when their connection ended, and their bytes received, by why
  // it ended: with the whole frames' bytes they add up to bytes_received.
  std::array<std::atomic<std::uint64_t>, partial_discard_count> partial_frames_discarded{};
  std::array<std::atomic<std::uint64_t>, partial_discard_count> partial_bytes_discarded{};
  // TLS handshakes that failed, by reason (net::tls_failure).
  std::array<std::atomic<std::uint64_t>, net::tls_failure_count> tls_failures{};
  std::atomic<std::uint64_t> tls_handshakes{0};  // completed
  // Established TLS connections that ended other than by close_notify, by reason.
  std::array<std::atomic<std::uint64_t>, net::tls_error_count> tls_errors{};
  // Open TLS connections by who seals and opens their records (net::tls_records).
  std::array<std::atomic<std::int64_t>, net::tls_records_count> tls_connections{};
  // CONFIRM frames: passed by a cumulative `confirm` sent back (rejected ones included), and
  // rejected, by reason (index = wire reason - 1); numbered and not yet confirmed, all open
  // connections together.
  std::atomic<std::uint64_t> confirmed_frames{0};
  std::array<std::atomic<std::uint64_t>, protocol::reject_reason_count> rejected_frames{};
  std::atomic<std::int64_t> unconfirmed_frames{0};
  // What every connection's confirm ledger holds, open and closed ones (a closed connection's
  // blocks with a frame still owed), against max_confirm_ledger_bytes. A block is taken when
  // allocated and given back when freed (any thread). Nothing is refused here, and nobody waits
  // on it: the bound is shared out among the consumers, each of which applies its own policy at
  // its share (consumers/confirm_share.hpp), so what one consumer owes never holds back
  // another's suppliers.
  runtime::byte_budget confirm_ledger;
};

// One session's share of the above, for /connz: added to where the session adds to
// supplier_stats (once per read), read by other threads.
struct session_stats {
  const std::chrono::system_clock::time_point since = std::chrono::system_clock::now();
  std::atomic<std::uint64_t> frames{0};
  std::atomic<std::uint64_t> bytes{0};
  // 0: plaintext, or TLS not yet handshaken; else 1 + the net::tls_records of the connection.
  std::atomic<std::uint8_t> tls_records{0};
  // CONFIRM frames confirmed (the last cumulative `confirm` sent) and numbered but not yet.
  std::atomic<std::uint64_t> confirmed{0};
  std::atomic<std::uint64_t> pending{0};
};

}  // namespace gatewayd::suppliers
