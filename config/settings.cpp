#include "config/settings.hpp"

#include <array>

namespace gatewayd::config {
namespace {

std::string text_of(const net::endpoint& e) {
  return e.to_string();
}
std::string text_of(std::uint32_t v) {
  return std::to_string(v);
}
std::string text_of(std::uint64_t v) {
  return std::to_string(v);
}
std::string text_of(bool v) {
  return v ? "true" : "false";
}
std::string text_of(std::chrono::milliseconds ms) {
  return std::to_string(ms.count());
}
std::string text_of(std::chrono::microseconds us) {
  return std::to_string(us.count());
}
std::string text_of(const std::filesystem::path& p) {
  return p.string();
}
std::string text_of(ktls_mode m) {
  return std::string{to_string(m)};
}
std::string text_of(log::level l) {
  return std::string{log::to_string(l)};
}
std::string text_of(const std::vector<net::cidr_block>& blocks) {
  std::string s = "[";
  for (const auto& b : blocks) {
    if (s.size() > 1) s += ", ";
    s += b.to_string();
  }
  return s + "]";
}

// One table row for the service_config member `Member`.
template <auto Member>
constexpr setting field(std::string_view section, std::string_view key, reload_effect effect) {
  return setting{
      section,
      key,
      effect,
      [](const service_config& a, const service_config& b) { return a.*Member == b.*Member; },
      [](service_config& to, const service_config& from) { to.*Member = from.*Member; },
      [](const service_config& c) { return text_of(c.*Member); },
  };
}

using enum reload_effect;
using c = service_config;

// Settings bound into running parts (listeners, the thread pool, open sessions, the queue
// budget, consumers' backoff and writers) keep their start-up value: a reload cannot rebuild
// them without dropping connections.
constexpr std::array table{
    field<&c::supplier_listen>("gateway", "supplier_listen", restart),
    field<&c::threads>("gateway", "threads", restart),
    field<&c::idle_poll>("gateway", "idle_poll_us", restart),
    field<&c::max_payload>("gateway", "max_payload", restart),
    field<&c::routes_file>("gateway", "routes_file", live),
    field<&c::idle_timeout>("gateway", "idle_timeout_ms", restart),
    field<&c::max_supplier_connections>("gateway", "max_supplier_connections", restart),
    field<&c::max_handshaking_connections>("gateway", "max_handshaking_connections", restart),
    field<&c::drain_timeout>("gateway", "drain_timeout_ms", live),
    field<&c::lame_duck>("gateway", "lame_duck_ms", live),
    field<&c::reconnect_initial>("gateway", "reconnect_initial_ms", restart),
    field<&c::reconnect_max>("gateway", "reconnect_max_ms", restart),
    field<&c::max_queued_bytes>("gateway", "max_queued_bytes", restart),
    field<&c::max_partial_frame_bytes>("gateway", "max_partial_frame_bytes", restart),
    field<&c::allow>("gateway", "allow", live),
    field<&c::proxy_protocol>("gateway", "proxy_protocol", restart),
    field<&c::proxy_from>("gateway", "proxy_from", restart),
    field<&c::slow_consumer>("gateway", "slow_consumer_ms", restart),
    field<&c::consumer_connect_timeout>("gateway", "consumer_connect_timeout_ms", restart),
    field<&c::consumer_timeout>("gateway", "consumer_timeout_ms", restart),
    field<&c::max_unconfirmed_frames>("gateway", "max_unconfirmed_frames", restart),
    field<&c::confirm_timeout>("gateway", "confirm_timeout_ms", restart),
    field<&c::max_confirm_ledger_bytes>("gateway", "max_confirm_ledger_bytes", restart),
    field<&c::tls_cert>("tls", "cert", live_while_tls),
    field<&c::tls_key>("tls", "key", live_while_tls),
    field<&c::tls_client_ca>("tls", "client_ca", live_while_tls),
    field<&c::tls_crl>("tls", "crl", live_while_tls),
    field<&c::tls_allow_readable_key>("tls", "allow_readable_key", live),
    field<&c::tls_handshake_timeout>("tls", "handshake_timeout_ms", restart),
    field<&c::tls_ktls>("tls", "ktls", live),
    field<&c::metrics_listen>("metrics", "listen", restart),
    field<&c::metrics_enabled>("metrics", "enabled", restart),
    // civetweb reads its access list once, at start: a new one would take a new server.
    field<&c::metrics_allow>("metrics", "allow", restart),
    field<&c::log_level>("log", "level", live),
};

}  // namespace

std::string setting::path() const {
  std::string p{section};
  p += '.';
  p += key;
  return p;
}

std::span<const setting> settings() noexcept {
  return table;
}

std::vector<std::string_view> keys_of(std::string_view section) {
  std::vector<std::string_view> keys;
  for (const auto& s : table) {
    if (s.section == section) keys.push_back(s.key);
  }
  return keys;
}

reload_plan plan_reload(const service_config& running, const service_config& next,
                        std::span<const setting> table) {
  reload_plan plan;
  service_config covered = running;
  covered.config_file = next.config_file;  // where the file is, not a key in it
  const bool tls_stays = running.tls_files() && next.tls_files();
  for (const auto& s : table) {
    s.copy(covered, next);
    if (s.same(running, next)) continue;
    const bool applied = s.effect == live || (s.effect == live_while_tls && tls_stays);
    (applied ? plan.live : plan.restart).push_back(&s);
  }
  plan.unclassified = !(covered == next);
  return plan;
}

}  // namespace gatewayd::config
