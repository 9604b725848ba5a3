// libFuzzer target: the routes.toml loader over arbitrary text. Whatever the text, it returns
// either a config or errors (never both, never neither), and a config it accepts must build
// into a routing table and route every pattern's own literal addresses.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "config/routes_loader.hpp"
#include "fuzz/check.hpp"
#include "protocol/frame_codec.hpp"
#include "routing/pattern.hpp"
#include "routing/routing_table.hpp"

using namespace gatewayd::config;
using namespace gatewayd::routing;

using gatewayd::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const routes_load_result r = parse_routes_config(text, "fuzz.toml");
  check(r.config.has_value() == r.errors.empty());
  for (const auto& e : r.errors)
    check(!e.to_string().empty());
  if (!r.config) return 0;

  const auto& cfg = *r.config;
  for (const auto& c : cfg.consumers)
    check(valid_consumer_name(c.name));
  for (const auto& route : cfg.routes)
    check(valid_pattern(route.match) && !route.to.empty());
  const auto table = routing_table::build(cfg.rules());  // throws (and so fails) on what it refuses
  check(table->route_count() == cfg.routes.size());

  // A pattern with its wildcards replaced by a literal token is an address it matches.
  lookup_scratch scratch;
  for (const auto& route : cfg.routes) {
    std::string address;
    for (auto token : split_tokens(route.match)) {
      if (!address.empty()) address += '.';
      address +=
          (token == one_token_wildcard || token == tail_wildcard) ? std::string_view("x") : token;
    }
    if (!gatewayd::protocol::valid_address(address)) continue;  // over 255 bytes
    check(pattern_matches(route.match, address));
    const auto hit = table->lookup(address, scratch);
    check(hit.matched && !hit.consumers.empty());
  }
  return 0;
}
