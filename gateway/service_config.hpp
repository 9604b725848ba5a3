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

#include "gateway/log.hpp"
#include "routing/config_error.hpp"
#include "routing/endpoint.hpp"
#include "routing/routing_config.hpp"

namespace gatewayd::gateway {

using routing::config_error;

// How the gateway runs its handlers (the reactor threading models compared in docs/).
enum class concurrency_model : std::uint8_t {
  leader_followers,
  half_sync_half_async,
  asio_threads
};
std::string_view to_string(concurrency_model m) noexcept;  // "leader-followers", ...
std::optional<concurrency_model> parse_concurrency_model(std::string_view text) noexcept;

// Who writes a consumer's queue to its socket: its strand (the design) or, for the benchmark's
// comparison, the enqueuing thread under a per-consumer mutex with blocking writes.
enum class consumer_drain_model : std::uint8_t { strand, mutex };
std::string_view to_string(consumer_drain_model m) noexcept;  // "strand", "mutex"
std::optional<consumer_drain_model> parse_consumer_drain_model(std::string_view text) noexcept;

// An IPv4 or IPv6 network such as "10.0.0.0/8" or "fd00::/8" (a bare address is a /32 or
// /128) that suppliers may connect from.
struct cidr_block {
  bool ipv6 = false;
  std::array<std::uint8_t, 16> network{};  // IPv4 uses the first 4 bytes
  std::uint8_t prefix_length = 0;

  // `address` holds 4 (IPv4) or 16 (IPv6) bytes in network order, as asio's
  // address_v4/v6::to_bytes() gives them. An IPv4-mapped IPv6 address (::ffff:a.b.c.d,
  // what a dual-stack listener reports for an IPv4 peer) is matched as IPv4.
  bool contains(std::span<const std::uint8_t> address) const noexcept;
  std::string to_string() const;

  friend bool operator==(const cidr_block&, const cidr_block&) = default;
};

// nullopt plus a reason when `text` is not a CIDR block (host bits set count as an error:
// "10.0.0.1/8" is almost always a typo for a host or for "10.0.0.0/8").
std::optional<cidr_block> parse_cidr(std::string_view text, std::string* why = nullptr);

struct service_config {
  std::filesystem::path config_file;  // gatewayd.toml, absolute and normalised

  // [gateway]
  routing::endpoint supplier_listen{"127.0.0.1", 7400};
  std::uint32_t threads = 0;                      // 0 = one per core
  std::uint32_t max_payload = 1048576;            // bytes
  std::filesystem::path routes_file;              // absolute and normalised
  std::chrono::milliseconds idle_timeout{60000};  // 0 = never
  std::uint32_t max_supplier_connections = 10000;
  concurrency_model concurrency = concurrency_model::leader_followers;
  consumer_drain_model consumer_drain = consumer_drain_model::strand;
  std::chrono::milliseconds drain_timeout{5000};
  std::chrono::milliseconds reconnect_initial{100};
  std::chrono::milliseconds reconnect_max{30000};
  std::uint64_t max_queued_bytes = 1073741824;  // across all consumers; 0 = no cap
  std::vector<cidr_block> allow;                // empty = every peer may connect

  // [metrics]
  routing::endpoint metrics_listen{"127.0.0.1", 9464};
  bool metrics_enabled = true;

  // [log]
  gatewayd::log::level log_level = gatewayd::log::level::info;

  // True when a connection from `address` (4 or 16 bytes) passes the allow list.
  bool allows(std::span<const std::uint8_t> address) const noexcept;

  friend bool operator==(const service_config&, const service_config&) = default;
};

struct service_load_result {
  std::optional<service_config> config;  // set only when errors is empty
  std::vector<config_error> errors;      // in file order
};

// Reads and validates gatewayd.toml; routes_file is resolved against its directory but the
// routes file itself is not read (see load_full_config).
service_load_result load_service_config(const std::filesystem::path& file);
// The same from text in memory; `file` names it in errors and anchors routes_file.
service_load_result parse_service_config(std::string_view toml_text,
                                         const std::filesystem::path& file);

struct full_config {
  service_config service;
  routing::routing_config routing;
};

struct full_load_result {
  std::optional<full_config> config;  // set only when errors is empty
  std::vector<config_error> errors;   // gatewayd.toml's first, then the routes file's
};

// Loads gatewayd.toml and the routes file it names, reporting the errors of both. When
// gatewayd.toml is too broken to say where the routes file is, only its own errors come back.
full_load_result load_full_config(const std::filesystem::path& file);

}  // namespace gatewayd::gateway
