// Every gatewayd.toml key in one table: where its value lives in service_config and whether a
// reload applies it or keeps the running value until a restart.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/service_config.hpp"

namespace gatewayd::config {

// The reader accepts only the keys of this table and a reload walks it to apply or warn, so a
// key cannot be added to one without the other (nats-server's reload refuses a field nobody
// classified the same way). settings_test also holds docs/configuration.md and the sample
// etc/gatewayd.toml to it.
enum class reload_effect : std::uint8_t {
  live,     // the reload applies the new value
  restart,  // the running value stays until a restart; the reload says so
  // A [tls] file: the reload applies the new path while the listener keeps TLS (the context is
  // rebuilt from it, as for new contents); turning TLS on or off takes a restart, since the
  // open connections and the listener speak one or the other.
  live_while_tls,
};

struct setting {
  std::string_view section;  // the TOML table: "gateway", "metrics", "log"
  std::string_view key;
  reload_effect effect;
  bool (*same)(const service_config&, const service_config&);
  void (*copy)(service_config& to, const service_config& from);
  std::string (*text)(const service_config&);  // the value as an operator would write it

  std::string path() const;  // "gateway.threads"
};

std::span<const setting> settings() noexcept;

// The keys the table has for `section`, in table order (what the reader accepts there).
std::vector<std::string_view> keys_of(std::string_view section);

// What a reload from `running` to `next` would do, setting by setting.
struct reload_plan {
  std::vector<const setting*> live;     // changed, applied by the reload (live_while_tls too)
  std::vector<const setting*> restart;  // changed, kept until a restart
  // A field of service_config changed that no setting covers: a bug in this table, which
  // settings_test catches; a reload then applies nothing it cannot name.
  bool unclassified = false;
};
reload_plan plan_reload(const service_config& running, const service_config& next,
                        std::span<const setting> table = settings());

}  // namespace gatewayd::config
