// What the configuration table's rows do beyond being there: their docs columns, reading the
// plain keys, the keys a table accepts, and the reload's plan.
#include <limits>
#include <stdexcept>

#include "config/settings.hpp"

namespace gatewayd::config {
namespace {

template <class Config>
std::vector<std::string_view> read_each(toml_checker& check, const toml::table& t,
                                        std::string_view path, std::string_view section,
                                        std::span<const setting_row<Config>> rows, Config& out) {
  // Empty `section`: every row (a consumer's, all in one table).
  std::vector<std::string_view> refused;
  for (const auto& row : rows) {
    if ((!section.empty() && row.section != section) || !row.read || !t.contains(row.key)) continue;
    if (!row.read(check, t, path, row, out)) refused.push_back(row.key);
  }
  return refused;
}

std::string bound_text(std::int64_t v) {
  return v == std::numeric_limits<std::int64_t>::max() ? "2^63-1" : std::to_string(v);
}

}  // namespace

template <class Config>
std::string setting_row<Config>::type_text() const {
  std::string s{type};
  if (range.max != 0) {
    s += ' ';
    if (range.nonzero_min != 0) s += bound_text(range.min) + " or ";
    s += bound_text(range.nonzero_min != 0 ? range.nonzero_min : range.min);
    s += ".." + bound_text(range.max);
  }
  if (!unit.empty()) s += ", " + std::string{unit};
  return s;
}

template <class Config>
std::string setting_row<Config>::default_text() const {
  return absent.empty() ? '`' + literal(Config{}) + '`' : std::string{absent};
}

template struct setting_row<service_config>;
template struct setting_row<consumers::consumer_spec>;

std::vector<std::string_view> keys_of(std::string_view section) {
  std::vector<std::string_view> keys;
  for (const auto& s : settings()) {
    if (s.section == section) keys.push_back(s.key);
  }
  return keys;
}

const setting& setting_at(std::string_view section, std::string_view key) {
  for (const auto& s : settings()) {
    if (s.section == section && s.key == key) return s;
  }
  throw std::logic_error("no setting " + std::string{section} + '.' + std::string{key});
}

std::vector<std::string_view> consumer_keys() {
  std::vector<std::string_view> keys;
  for (const auto& s : consumer_settings())
    keys.push_back(s.key);
  return keys;
}

std::vector<std::string_view> read_rows(toml_checker& check, const toml::table& t,
                                        std::string_view section, service_config& out) {
  return read_each<service_config>(check, t, section, section, settings(), out);
}

std::vector<std::string_view> read_consumer_rows(toml_checker& check, const toml::table& t,
                                                 std::string_view path,
                                                 consumers::consumer_spec& out) {
  return read_each<consumers::consumer_spec>(check, t, path, {}, consumer_settings(), out);
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
    const bool applied =
        s.effect == reload_effect::live || (s.effect == reload_effect::live_while_tls && tls_stays);
    (applied ? plan.live : plan.restart).push_back(&s);
  }
  plan.unclassified = !(covered == next);
  return plan;
}

}  // namespace gatewayd::config
