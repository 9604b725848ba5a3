// The configuration table itself: a row per key of gatewayd.toml and of [consumers.NAME].
#include "config/settings.hpp"

#include <array>
#include <limits>

#include "config/setting_row_maker.hpp"

namespace gatewayd::config {
namespace {

using enum reload_effect;
using enum apply_hook;
using rows::bind;
using c = service_config;
using k = consumers::consumer_spec;

// Timer values are kept below 2^31 ms (about 24.8 days) so any timer API can take them.
constexpr std::int64_t max_ms = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t max_i64 = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t max_connections = 1 << 20;

constexpr value_range ms_from(std::int64_t min) {
  return {min, max_ms};
}

// A row names only the columns it has; the rest keep their defaults (no unit, no range, no hook).
// GCC 12 warns of designated initializers that leave members out, which is what they are for.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

// Settings bound into running parts (listeners, the thread pool, open sessions, the queue
// budget, consumers' backoff and writers) keep their start-up value: a reload cannot rebuild
// them without dropping connections.
constexpr std::array table{
    bind<&c::supplier_listen>({.section = "gateway",
                               .key = "supplier_listen",
                               .type = "endpoint string",
                               .description = "where suppliers connect"}),
    bind<&c::threads>({.section = "gateway",
                       .key = "threads",
                       .type = "integer",
                       .range = {0, 1024},
                       .description = "Leader/Followers threads; 0 = one per core"}),
    // Beyond 10 ms a core burns for no latency gain.
    bind<&c::idle_poll>({.section = "gateway",
                         .key = "idle_poll_us",
                         .type = "integer",
                         .range = {0, 10000},
                         .description = "how long (µs) an idle thread polls before it sleeps"}),
    bind<&c::max_payload>({.section = "gateway",
                           .key = "max_payload",
                           .type = "integer",
                           .unit = "bytes",
                           .range = {1, 268435456},
                           .description = "largest payload a frame may announce"}),
    bind<&c::routes_file>({.section = "gateway",
                           .key = "routes_file",
                           .type = "string, **required**",
                           .absent = "—",
                           .effect = live,
                           .description = "the routing table file, relative to gatewayd.toml"}),
    bind<&c::idle_timeout>({.section = "gateway",
                            .key = "idle_timeout_ms",
                            .type = "integer",
                            .unit = "ms",
                            .range = ms_from(0),
                            .description = "a supplier connection silent this long is closed; "
                                           "0 = never"}),
    bind<&c::max_supplier_connections>({.section = "gateway",
                                        .key = "max_supplier_connections",
                                        .type = "integer",
                                        .range = {1, max_connections},
                                        .description = "supplier connections open at once"}),
    bind<&c::max_handshaking_connections>(
        {.section = "gateway",
         .key = "max_handshaking_connections",
         .type = "integer",
         .range = {1, max_connections},
         .description = "connections in their TLS handshake or PROXY header"}),
    bind<&c::drain_timeout>({.section = "gateway",
                             .key = "drain_timeout_ms",
                             .type = "integer",
                             .unit = "ms",
                             .range = ms_from(0),
                             .effect = live,
                             .description = "how long a stop or a removed consumer drains"}),
    // A spool's folder is named by the consumer in it; the files are the gateway's (0600).
    bind<&c::spool_dir>({.section = "gateway",
                         .key = "spool_dir",
                         .type = "string (a folder)",
                         .absent = "`spool`, beside this file",
                         .description = "where consumers with spool_max_bytes keep their spools"}),
    // A confirm waits at most this long for the disk; 0 syncs once the work at hand is done.
    bind<&c::spool_sync>({.section = "gateway",
                          .key = "spool_sync_ms",
                          .type = "integer",
                          .unit = "ms",
                          .range = {0, 10000},
                          .description = "how often spools are synced to disk (group commit)"}),
    bind<&c::lame_duck>({.section = "gateway",
                         .key = "lame_duck_ms",
                         .type = "integer",
                         .unit = "ms",
                         .range = ms_from(0),
                         .effect = live,
                         .description = "how long a stop answers /readyz 503 before draining"}),
    bind<&c::reconnect_initial>({.section = "gateway",
                                 .key = "reconnect_initial_ms",
                                 .type = "integer",
                                 .unit = "ms",
                                 .range = ms_from(1),
                                 .description = "first delay before redialling a consumer"}),
    bind<&c::reconnect_max>({.section = "gateway",
                             .key = "reconnect_max_ms",
                             .type = "integer",
                             .unit = "ms",
                             .range = ms_from(1),
                             .description = "upper bound of the redial delay"}),
    bind<&c::max_queued_bytes>({.section = "gateway",
                                .key = "max_queued_bytes",
                                .type = "integer",
                                .unit = "bytes",
                                .range = {0, max_i64},
                                .description = "bytes queued for all consumers; 0 = no cap"}),
    bind<&c::max_partial_frame_bytes>(
        {.section = "gateway",
         .key = "max_partial_frame_bytes",
         .type = "integer",
         .unit = "bytes",
         .range = {0, max_i64},
         .description = "what large frames hold while they arrive, all suppliers; 0 = no cap"}),
    bind<&c::allow>({.section = "gateway",
                     .key = "allow",
                     .type = "array of CIDR strings",
                     .effect = live,
                     .hook = allow_list,
                     .description = "networks suppliers may connect from; empty = every one"}),
    bind<&c::proxy_protocol>({.section = "gateway",
                              .key = "proxy_protocol",
                              .type = "boolean",
                              .description = "read a PROXY v2 header from proxy_from peers"}),
    bind<&c::proxy_from>({.section = "gateway",
                          .key = "proxy_from",
                          .type = "array of CIDR strings",
                          .description = "the balancers whose PROXY headers are believed"}),
    bind<&c::slow_consumer>({.section = "gateway",
                             .key = "slow_consumer_ms",
                             .type = "integer",
                             .unit = "ms",
                             .range = ms_from(1),
                             .description = "how long a full consumer may take to catch up"}),
    bind<&c::consumer_connect_timeout>({.section = "gateway",
                                        .key = "consumer_connect_timeout_ms",
                                        .type = "integer",
                                        .unit = "ms",
                                        .range = ms_from(1),
                                        .description = "a dial to a consumer's bound"}),
    bind<&c::consumer_timeout>(
        {.section = "gateway",
         .key = "consumer_timeout_ms",
         .type = "integer",
         .unit = "ms",
         .range = ms_from(0),
         .description = "how long a consumer may leave what was sent unacknowledged"}),
    bind<&c::max_unconfirmed_frames>(
        {.section = "gateway",
         .key = "max_unconfirmed_frames",
         .type = "integer",
         .unit = "frames",
         .range = {1, 1 << 20},
         .description = "CONFIRM frames one supplier connection may have unconfirmed"}),
    bind<&c::confirm_timeout>({.section = "gateway",
                               .key = "confirm_timeout_ms",
                               .type = "integer",
                               .unit = "ms",
                               .range = ms_from(1),
                               .description = "how long a supplier may leave its confirms unread"}),
    // Below 1 MiB, one connection's ledger alone could hold every confirm-mode supplier up.
    bind<&c::max_confirm_ledger_bytes>(
        {.section = "gateway",
         .key = "max_confirm_ledger_bytes",
         .type = "integer",
         .unit = "bytes",
         .range = {0, max_i64, 1048576},
         .description = "the bound on CONFIRM frames owed, shared among consumers; 0 = none"}),
    bind<&c::tls_cert>({.section = "tls",
                        .key = "cert",
                        .type = "path string, **required in this table**",
                        .absent = "—",
                        .effect = live_while_tls,
                        .description = "the gateway's certificate chain, PEM"}),
    bind<&c::tls_key>({.section = "tls",
                       .key = "key",
                       .type = "path string, **required in this table**",
                       .absent = "—",
                       .effect = live_while_tls,
                       .description = "the private key of cert, PEM"}),
    bind<&c::tls_client_ca>({.section = "tls",
                             .key = "client_ca",
                             .type = "path string",
                             .absent = "none",
                             .effect = live_while_tls,
                             .description = "the CAs that sign suppliers' certificates"}),
    bind<&c::tls_crl>({.section = "tls",
                       .key = "crl",
                       .type = "path string",
                       .absent = "none",
                       .effect = live_while_tls,
                       .description = "revocation lists of client_ca's CAs"}),
    bind<&c::tls_allow_readable_key>(
        {.section = "tls",
         .key = "allow_readable_key",
         .type = "boolean",
         .effect = live,
         .description = "a key its group or others may read is warned of, not refused"}),
    bind<&c::tls_handshake_timeout>({.section = "tls",
                                     .key = "handshake_timeout_ms",
                                     .type = "integer",
                                     .unit = "ms",
                                     .range = ms_from(1),
                                     .description = "how long a TLS handshake may take"}),
    bind<&c::tls_ktls>({.section = "tls",
                        .key = "ktls",
                        .type = "`\"auto\"` or `\"off\"`",
                        .effect = live,
                        .hook = kernel_tls,
                        .description = "whether the kernel may keep TLS records"}),
    bind<&c::metrics_listen>({.section = "metrics",
                              .key = "listen",
                              .type = "endpoint string",
                              .description = "where /metrics and the operator API answer"}),
    bind<&c::metrics_enabled>({.section = "metrics",
                               .key = "enabled",
                               .type = "boolean",
                               .description = "serve metrics and the operator API at all"}),
    // civetweb reads its access list once, at start: a new one would take a new server.
    bind<&c::metrics_allow>({.section = "metrics",
                             .key = "allow",
                             .type = "array of CIDR strings, never empty",
                             .description = "who may connect to the metrics listener"}),
    bind<&c::log_level>({.section = "log",
                         .key = "level",
                         .type = "string",
                         .effect = live,
                         .hook = log_level,
                         .description = "least severe messages written"}),
};

// What a routes.toml reload does with a kept consumer's changed key (gateway/consumer_set.cpp
// and consumers/consumer.cpp's reconfigure).
constexpr std::string_view consumer = "consumers.NAME";
constexpr std::array consumer_table{
    bind<&k::address>({.section = consumer,
                       .key = "endpoint",
                       .type = "endpoint string, **required** unless `endpoints`",
                       .absent = "—",
                       .effect = redial,
                       .description = "the consumer's address, dialled"}),
    bind<&k::endpoints>({.section = consumer,
                         .key = "endpoints",
                         .type = "array of endpoint strings, instead of `endpoint`",
                         .absent = "—",
                         .effect = members,
                         .description = "a group: one member per endpoint"}),
    bind<&k::balance>({.section = consumer,
                       .key = "balance",
                       .type = "string, with `endpoints` only",
                       .effect = in_place,
                       .description = "how a group picks the member for a frame"}),
    bind<&k::queue_capacity>({.section = consumer,
                              .key = "queue_capacity",
                              .type = "integer",
                              .unit = "frames",
                              .range = {1, std::numeric_limits<std::uint32_t>::max()},
                              .effect = in_place,
                              .description = "frames held while it is slow or away"}),
    // 0 is refused, being ambiguous: leaving the key out means no byte cap.
    bind<&k::queue_bytes>({.section = consumer,
                           .key = "queue_bytes",
                           .type = "integer",
                           .unit = "bytes",
                           .range = {1, max_i64},
                           .absent = "no byte cap",
                           .effect = in_place,
                           .description = "byte cap on the same queue"}),
    bind<&k::overflow>({.section = consumer,
                        .key = "overflow",
                        .type = "string",
                        .effect = in_place,
                        .description = "what a full queue does with a new frame"}),
    bind<&k::tls>({.section = consumer,
                   .key = "tls",
                   .type = "inline table",
                   .absent = "plaintext",
                   .effect = redial,
                   .description = "dial over TLS: ca, server_name, cert, key, ktls, crl"}),
    bind<&k::ack>({.section = consumer,
                   .key = "ack",
                   .type = "boolean",
                   .effect = replace,
                   .description = "the consumer acknowledges what it takes (at-least-once)"}),
    // 0 keeps the consumer in memory only. On or off on a running consumer takes a restart.
    bind<&k::spool_max_bytes>({.section = consumer,
                               .key = "spool_max_bytes",
                               .type = "integer",
                               .unit = "bytes",
                               .range = {0, max_i64},
                               .effect = in_place,
                               .description = "its spool on disk (0 = none): what its queue "
                                              "cannot hold waits there"}),
    // Any size works: a frame larger than the limit still goes when nothing is held.
    bind<&k::max_unacked_bytes>({.section = consumer,
                                 .key = "max_unacked_bytes",
                                 .type = "integer",
                                 .unit = "bytes",
                                 .range = {1, max_i64},
                                 .effect = in_place,
                                 .description = "what is kept written but unacknowledged"}),
};

#pragma GCC diagnostic pop

}  // namespace

std::span<const setting> settings() noexcept {
  return table;
}

std::span<const consumer_setting> consumer_settings() noexcept {
  return consumer_table;
}

}  // namespace gatewayd::config
