// The service settings (gatewayd.toml) as plain validated data, and the loader for both files.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/config_error.hpp"
#include "config/credentials.hpp"
#include "config/ktls_mode.hpp"
#include "config/routes_config.hpp"
#include "net/cidr_block.hpp"
#include "net/endpoint.hpp"
#include "net/tls_files.hpp"
#include "runtime/log.hpp"

namespace gatewayd::config {

// 127.0.0.0/8 and ::1: a balancer on the same host (the default of proxy_from).
std::vector<net::cidr_block> loopback_blocks();

struct service_config {
  std::filesystem::path config_file;  // gatewayd.toml, absolute and normalised

  // [gateway]
  net::endpoint supplier_listen{"127.0.0.1", 7400};
  std::uint32_t threads = 0;  // 0 = one per core
  // Leader/Followers: how long an idle thread polls for the next event before it sleeps.
  std::chrono::microseconds idle_poll{0};
  std::uint32_t max_payload = 1048576;            // bytes
  std::filesystem::path routes_file;              // absolute and normalised
  std::chrono::milliseconds idle_timeout{60000};  // 0 = never
  std::uint32_t max_supplier_connections = 10000;
  // Connections still in their TLS handshake or PROXY header (they hold no place under
  // max_supplier_connections); at this many a new one evicts the oldest.
  std::uint32_t max_handshaking_connections = 256;
  std::chrono::milliseconds drain_timeout{5000};
  // Consumers with spool_max_bytes keep their spools here, one folder each; absolute and
  // normalised (absent: `spool` beside gatewayd.toml).
  std::filesystem::path spool_dir;
  std::chrono::milliseconds spool_sync{10};  // group commit: how long a confirm waits for disk
  std::chrono::milliseconds lame_duck{0};  // SIGTERM: /readyz 503 and still accepting, first
  std::chrono::milliseconds reconnect_initial{100};
  std::chrono::milliseconds reconnect_max{2000};  // a consumer back is redialled within 2 s
  std::chrono::milliseconds slow_consumer{100};   // full socket, not caught up: policy applies
  std::chrono::milliseconds consumer_connect_timeout{5000};
  std::chrono::milliseconds consumer_timeout{30000};  // unacknowledged or unanswered; 0 = kernel's
  std::uint64_t max_queued_bytes = 1073741824;        // across all consumers; 0 = no cap
  // What frames larger than a 64 KiB chunk hold beyond it while they arrive, across all
  // supplier connections; 0 = no cap.
  std::uint64_t max_partial_frame_bytes = 268435456;
  // CONFIRM frames one supplier connection may have unconfirmed before it is read no more
  // until confirms make room; how long its confirms may wait unread before it is closed.
  std::uint32_t max_unconfirmed_frames = 16384;
  std::chrono::milliseconds confirm_timeout{10000};
  // What all confirm ledgers together may hold (open connections' and closed ones' frames still
  // owed); at it, sessions with CONFIRM frames are read no more until frames settle. 0 = none.
  std::uint64_t max_confirm_ledger_bytes = 268435456;
  std::vector<net::cidr_block> allow;  // empty = every peer may connect
  bool proxy_protocol = false;         // PROXY v2 header from proxy_from sources
  std::vector<net::cidr_block> proxy_from = loopback_blocks();  // the balancers trusted to send it

  // [tls]: TLS on the supplier listener; absent (empty cert) = plaintext. Absolute, normalised.
  std::filesystem::path tls_cert;
  std::filesystem::path tls_key;
  std::filesystem::path tls_client_ca;  // empty = suppliers present no certificate
  std::filesystem::path tls_crl;        // PEM CRLs of client_ca's CAs; empty = none
  // The key may be readable by its group or others (access managed otherwise): warned of at
  // each start instead of refused.
  bool tls_allow_readable_key = false;
  std::chrono::milliseconds tls_handshake_timeout{10000};
  ktls_mode tls_ktls = ktls_mode::automatic;  // the kernel's record layer where the host has it
  // The [tls] files, when the table is there.
  std::optional<net::tls_server_files> tls_files() const {
    if (tls_cert.empty()) return std::nullopt;
    return net::tls_server_files{tls_cert, tls_key, tls_client_ca, tls_crl};
  }

  // [metrics]
  net::endpoint metrics_listen{"127.0.0.1", 9464};
  bool metrics_enabled = true;
  // Who may connect to the metrics listener (/metrics and the operator endpoints): never empty.
  std::vector<net::cidr_block> metrics_allow = loopback_blocks();

  // [log]
  gatewayd::log::level log_level = gatewayd::log::level::info;

  friend bool operator==(const service_config&, const service_config&) = default;
};

struct service_load_result {
  std::optional<service_config> config;  // set only when errors is empty
  std::vector<config_error> errors;      // in file order
};

// Reads and validates gatewayd.toml; routes_file is resolved against its directory but the
// routes file itself is not read (see load_full_config). [tls] file names starting with
// ${CREDENTIALS_DIRECTORY}/ are expanded with `creds`.
service_load_result load_service_config(const std::filesystem::path& file,
                                        const credentials& creds = credentials::from_environment());
// The same from text in memory; `file` names it in errors and anchors routes_file.
service_load_result parse_service_config(
    std::string_view toml_text, const std::filesystem::path& file,
    const credentials& creds = credentials::from_environment());

struct full_config {
  service_config service;
  routes_config routing;
  std::string routes_sha256;  // of the routes file's bytes
};

struct full_load_result {
  std::optional<full_config> config;  // set only when errors is empty
  std::vector<config_error> errors;   // gatewayd.toml's first, then the routes file's
};

// Loads gatewayd.toml and the routes file it names, reporting the errors of both. When
// gatewayd.toml is too broken to say where the routes file is, only its own errors come back.
full_load_result load_full_config(const std::filesystem::path& file,
                                  const credentials& creds = credentials::from_environment());

}  // namespace gatewayd::config
