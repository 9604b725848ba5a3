// Live counters of one consumer, written on its own path and read by the metrics scrape.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string_view>

#include "consumers/ack_reader.hpp"
#include "consumers/last_error.hpp"
#include "net/tls_channel.hpp"
#include "protocol/confirm_ledger.hpp"
#include "protocol/control_message.hpp"
#include "runtime/enum_names.hpp"

namespace gatewayd::consumers {

// Why a frame queued for a consumer was never sent. The names are the metric's `reason` label.
enum class drop_reason : std::uint8_t {
  queue_full,     // drop-oldest evicted it, or drop-newest refused it
  queue_bytes,    // the consumer's byte cap (queue_bytes) was reached
  global_bytes,   // the gateway-wide max_queued_bytes cap was reached
  slow_consumer,  // the disconnect policy discarded the queue
  removed,        // the consumer was removed by a reload and its drain time ran out
  shutdown,       // still queued (or unacknowledged) when the gateway's drain time ran out
  confirms_owed,  // a CONFIRM frame refused: the consumer owes its share of the confirm bound
};
inline constexpr runtime::enum_names<drop_reason, 7> drop_reason_names{
    {"queue_full", "queue_bytes", "global_bytes", "slow_consumer", "removed", "shutdown",
     "confirms_owed"}};
inline constexpr std::size_t drop_reason_count = drop_reason_names.count;
inline std::string_view to_string(drop_reason r) noexcept {
  return drop_reason_names(r);
}
// What a CONFIRM frame's supplier is told when one of its consumers drops it: its policy
// dropped it, or a reload removed the consumer with it. A stop tells it nothing: the frame is
// left unsettled, and its supplier resends it elsewhere (a stop never rejects).
constexpr protocol::give_up reject_for(drop_reason r) noexcept {
  if (r == drop_reason::shutdown) return std::nullopt;
  return r == drop_reason::removed ? protocol::reject_reason::removed
                                   : protocol::reject_reason::dropped;
}

// Why a consumer connection that was up ended. The names are the metric's `reason` label.
enum class disconnect_reason : std::uint8_t {
  peer_closed,       // the consumer closed it (end of stream)
  reset,             // the consumer's host reset it (ECONNRESET, EPIPE): it crashed or restarted
  timed_out,         // unacknowledged or unanswered for consumer_timeout_ms (ETIMEDOUT)
  error,             // any other socket error
  slow_consumer,     // the disconnect policy dropped it
  endpoint_changed,  // a reload moved the consumer
  closed,            // the consumer was removed or the gateway stopped
  protocol_error,    // it sent what it may not (ack_error): not acks, or bytes without `ack`
};
inline constexpr runtime::enum_names<disconnect_reason, 8> disconnect_reason_names{
    {"peer_closed", "reset", "timed_out", "error", "slow_consumer", "endpoint_changed", "closed",
     "protocol_error"}};
inline constexpr std::size_t disconnect_reason_count = disconnect_reason_names.count;
inline std::string_view to_string(disconnect_reason r) noexcept {
  return disconnect_reason_names(r);
}

// Why a dial failed. The names are the metric's `reason` label; the tls_ ones are a TLS
// consumer's handshake (net::tls_failure, narrowed to what a client can meet).
enum class connect_failure : std::uint8_t {
  refused,              // nothing listens there (ECONNREFUSED)
  timed_out,            // no answer within consumer_connect_timeout_ms
  unreachable,          // no route to the host or network
  error,                // anything else
  tls_timeout,          // no complete handshake within the bound (a plaintext peer says nothing)
  tls_not_tls,          // the peer answered with something that is not TLS
  tls_unknown_ca,       // its certificate does not chain to the tls.ca bundle
  tls_expired,          // its certificate is expired or not yet valid
  tls_wrong_name,       // its certificate does not carry tls.server_name
  tls_bad_certificate,  // any other verification failure
  tls_rejected,         // the consumer refused us with an alert (e.g. it wants a client cert)
  tls_protocol,         // version or cipher mismatch, bad record, closed mid-handshake
};
inline constexpr runtime::enum_names<connect_failure, 12> connect_failure_names{
    {"refused", "timed_out", "unreachable", "error", "tls_timeout", "tls_not_tls", "tls_unknown_ca",
     "tls_expired", "tls_wrong_name", "tls_bad_certificate", "tls_rejected", "tls_protocol"}};
inline constexpr std::size_t connect_failure_count = connect_failure_names.count;
inline std::string_view to_string(connect_failure r) noexcept {
  return connect_failure_names(r);
}

// Single-writer counters use relaxed atomics: a scrape may see a slightly old value, never a
// torn one, and the hot path pays no lock and no contended cache line for them.
struct consumer_stats {
  std::atomic<std::uint64_t> queued_frames{0};
  std::atomic<std::uint64_t> queued_bytes{0};
  std::atomic<std::uint64_t> sent_frames{0};
  std::atomic<std::uint64_t> sent_bytes{0};
  std::atomic<std::uint64_t> reconnects{0};
  std::atomic<bool> connected{false};
  std::atomic<bool> tls{false};  // dials with TLS: its connect failures include the tls_ reasons
  // Not connected, or behind for longer than slow_consumer_ms: its overflow policy applies.
  std::atomic<bool> congested{true};
  // Frames put now would pause the suppliers (its queue is at the mark its flow pauses at): a
  // group passes over such a member while another has room. Not a metric.
  std::atomic<bool> at_pause_mark{false};
  std::array<std::atomic<std::uint64_t>, drop_reason_count> dropped{};
  std::array<std::atomic<std::uint64_t>, disconnect_reason_count> disconnects{};
  std::array<std::atomic<std::uint64_t>, connect_failure_count> connect_failures{};
  // 0: no TLS connection up; else 1 + the net::tls_records of the one that is.
  std::atomic<std::uint8_t> tls_records{0};
  // TLS connections that ended other than by an orderly close, by reason (net::tls_error).
  std::array<std::atomic<std::uint64_t>, net::tls_error_count> tls_errors{};
  // Counted as sent, but not acknowledged by the consumer's host when its connection failed.
  std::atomic<std::uint64_t> unacknowledged_bytes{0};
  // An `ack = true` consumer's frames written and not acknowledged yet (held for it), the
  // frames put back in front of its queue for a new connection, and the connections it had
  // closed for sending something other than well-formed acks, by reason (ack_error, 0 unused).
  std::atomic<std::uint64_t> unacked_frames{0};
  std::atomic<std::uint64_t> unacked_bytes{0};
  std::atomic<std::uint64_t> redelivered_frames{0};
  std::array<std::atomic<std::uint64_t>, ack_error_count> protocol_errors{};
  // A group member's handovers (it failed, fell behind or left, and gave what it held to the
  // other members), the frames it gave, and the frames it took over from the others.
  std::atomic<std::uint64_t> handovers{0};
  std::atomic<std::uint64_t> handed_over_frames{0};
  std::atomic<std::uint64_t> taken_over_frames{0};
  // CONFIRM frames routed to it (put, or taken over from another member) and those it settled
  // (delivered, rejected, left unsettled, or handed over): what it owes is the difference,
  // counted against its share of max_confirm_ledger_bytes (confirm_share.hpp). Taken only under
  // the consumer's lock; settled wherever a release_batch of its flushes.
  std::atomic<std::uint64_t> confirms_taken{0};
  std::atomic<std::uint64_t> confirms_settled{0};
  // Thread time lost to this consumer, in ns (gatewayd_consumer_blocked_seconds_total): waiting
  // for its queue lock in put(), timed only when contended.
  std::atomic<std::uint64_t> blocked_lock_ns{0};
  // Set by the link, not on the data path.
  consumers::last_error last_error;

  // CONFIRM frames routed to it and not settled by it yet (a scrape may see a moment's skew).
  std::uint64_t confirms_owed() const noexcept {
    const std::uint64_t settled = confirms_settled.load(std::memory_order_relaxed);
    const std::uint64_t taken = confirms_taken.load(std::memory_order_relaxed);
    return taken > settled ? taken - settled : 0;
  }

  std::uint64_t dropped_total() const noexcept {
    std::uint64_t sum = 0;
    for (const auto& d : dropped)
      sum += d.load(std::memory_order_relaxed);
    return sum;
  }
};

}  // namespace gatewayd::consumers
