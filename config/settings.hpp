// The configuration table: one row per key of gatewayd.toml and of a routes.toml consumer, with
// everything about the key that is not the code using its value.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/service_config.hpp"
#include "config/toml_checker.hpp"
#include "consumers/consumer_spec.hpp"

namespace gatewayd::config {

// The reader accepts only the keys of the table and reads the plain ones (integers, durations,
// booleans) from their row; a reload walks it to apply or warn, so a key cannot be added to one
// without the other (nats-server's reload refuses a field nobody classified the same way).
// settings_test holds docs/configuration.md (type with bounds, default, reload) and the sample
// etc/gatewayd.toml to it. A row's default is its struct's (service_config, consumer_spec): the
// one place it is written.
enum class reload_effect : std::uint8_t {
  live,     // the reload applies the new value
  restart,  // the running value stays until a restart; the reload says so
  // A [tls] file: the reload applies the new path while the listener keeps TLS (the context is
  // rebuilt from it, as for new contents); turning TLS on or off takes a restart, since the
  // open connections and the listener speak one or the other.
  live_while_tls,
  // A consumer's keys (routes.toml reloads whole): changed in place, the consumer redialled
  // (its queue kept), replaced by a new one (the old drains), or a group's members matched by
  // endpoint (new ones dialled, removed ones hand their queue over).
  in_place,
  redial,
  replace,
  members,
};

// What a live gatewayd.toml key needs beyond its new value in service_config, done by the
// reloader (gateway/reloader.cpp, a switch the compiler holds to every hook).
enum class apply_hook : std::uint8_t {
  none,        // read where it is used (at the next shutdown, reload, accept)
  log_level,   // the log's threshold
  kernel_tls,  // offered to new supplier connections
  allow_list,  // new connections checked against it, open ones it no longer admits closed
};

// An integer key's bounds, as the reader enforces them and the docs state them.
struct value_range {
  std::int64_t min = 0;
  std::int64_t max = 0;
  // Not 0: a value other than 0 is at least this (0 = none; a rule of the reader's, with why).
  std::int64_t nonzero_min = 0;
};

template <class Config>
struct setting_row {
  std::string_view section;  // the TOML table: "gateway", "tls", "metrics", "log", "consumers.NAME"
  std::string_view key;
  std::string_view type;  // docs' type column: "integer", "endpoint string", ...
  std::string_view unit;  // an integer's: "ms", "bytes", "frames" or none
  value_range range;      // integers only
  // The default when it is no value of the key's type ("—" for a required key, "none"): what
  // docs' default column says; empty: the struct's default, as a TOML literal.
  std::string_view absent;
  reload_effect effect = reload_effect::restart;
  apply_hook hook = apply_hook::none;
  std::string_view description;  // one line; docs/configuration.md says the rest
  // Filled by the row's maker from the member it names:
  bool (*same)(const Config&, const Config&) = nullptr;
  void (*copy)(Config& to, const Config& from) = nullptr;
  std::string (*text)(const Config&) = nullptr;     // the value as an operator would write it
  std::string (*literal)(const Config&) = nullptr;  // as a TOML value
  // Reads the key from `table` (named `path` in errors) into the config; false when it is there
  // but refused. Null for a key its table's reader reads by a rule of its own.
  bool (*read)(toml_checker&, const toml::table&, std::string_view path, const setting_row&,
               Config&) = nullptr;

  std::string path() const {  // "gateway.threads"
    std::string p{section};
    p += '.';
    p += key;
    return p;
  }
  // "integer 1..2147483647, ms": docs' type column.
  std::string type_text() const;
  // "`60000`", or `absent`: docs' default column, up to its first remark.
  std::string default_text() const;
};

using setting = setting_row<service_config>;
using consumer_setting = setting_row<consumers::consumer_spec>;

std::span<const setting> settings() noexcept;                    // gatewayd.toml
std::span<const consumer_setting> consumer_settings() noexcept;  // [consumers.NAME]

// The keys the table has for `section`, in table order (what the reader accepts there).
std::vector<std::string_view> keys_of(std::string_view section);
std::vector<std::string_view> consumer_keys();
// The row of a gatewayd.toml key the caller knows is there (a reader's own rule reads its bounds).
const setting& setting_at(std::string_view section, std::string_view key);

// Reads every key of `section` that has a reader of its row and is in `table`; returns the keys
// that were there but refused (cross-checks leave them out, so one bad value is reported once).
std::vector<std::string_view> read_rows(toml_checker& check, const toml::table& table,
                                        std::string_view section, service_config& out);
std::vector<std::string_view> read_consumer_rows(toml_checker& check, const toml::table& table,
                                                 std::string_view path,
                                                 consumers::consumer_spec& out);

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
