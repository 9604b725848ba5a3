// libFuzzer target: the gatewayd.toml loader over arbitrary text. It returns a config or
// errors (never both, never neither), every error names the file, the same text always gives
// the same answer, and a config it accepts keeps the cross-key rules and round-trips its
// addresses and networks through their text forms.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "config/service_config.hpp"
#include "fuzz/check.hpp"

using namespace gatewayd;

using gatewayd::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::filesystem::path file = "/etc/gatewayd/gatewayd.toml";
  const auto r = config::parse_service_config(text, file);
  check(r.config.has_value() == r.errors.empty());
  for (const auto& e : r.errors) {
    check(e.file == file.string());
    check(e.to_string().starts_with(file.string() + ":"));
  }
  const auto again = config::parse_service_config(text, file);
  check(again.config == r.config);
  check(again.errors.size() == r.errors.size());
  if (!r.config) return 0;

  const auto& c = *r.config;
  check(c.routes_file.is_absolute());
  check(c.routes_file == c.routes_file.lexically_normal());
  check(c.max_payload >= 1);
  check(c.max_queued_bytes == 0 || c.max_queued_bytes >= c.max_payload);
  check(c.reconnect_max >= c.reconnect_initial);
  check(!c.metrics_enabled || c.metrics_listen.port == 0 || c.metrics_listen != c.supplier_listen);
  for (const auto& e : {c.supplier_listen, c.metrics_listen})
    check(net::parse_endpoint(e.to_string()) == e);
  for (const auto& block : c.allow)
    check(net::parse_cidr(block.to_string()) == block);
  return 0;
}
