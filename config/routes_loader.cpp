#include "config/routes_loader.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <utility>

#include "config/config_text.hpp"
#include "config/consumer_tls_reader.hpp"
#include "config/file_digest.hpp"
#include "config/nearest_name.hpp"
#include "config/settings.hpp"
#include "config/toml_checker.hpp"
#include "routing/pattern.hpp"

namespace gatewayd::config {
namespace {

using consumers::consumer_spec;
using routing::route_spec;
using presence = toml_checker::presence;

bool position_less(const toml::source_region& a, const toml::source_region& b) {
  return std::pair{a.begin.line, a.begin.column} < std::pair{b.begin.line, b.begin.column};
}

// Reads one routes.toml document into `config`, reporting every problem to `check`.
class routing_reader {
 public:
  // `base`: the routes file's folder, against which the consumers' TLS file names resolve
  // (`creds`: where those starting with ${CREDENTIALS_DIRECTORY}/ do).
  routing_reader(toml_checker& check, std::filesystem::path base, const credentials& creds)
      : check_(check), base_(std::move(base)), creds_(creds) {}

  routes_config read(const toml::table& root) {
    check_.reject_unknown_keys(
        root, "", {"consumers", "routes", "dead_letter", "suppliers", "suppliers_default"});
    if (const auto* consumers = check_.table(root, "", "consumers")) read_consumers(*consumers);
    if (const auto* routes = check_.array(root, "", "routes")) read_routes(*routes);
    if (const auto* dead_letter = check_.table(root, "", "dead_letter")) {
      read_dead_letter(*dead_letter);
    }
    if (const auto* suppliers = check_.table(root, "", "suppliers")) read_suppliers(*suppliers);
    if (const auto* fallback = check_.table(root, "", "suppliers_default")) {
      config_.suppliers_default_written = true;
      check_.reject_unknown_keys(*fallback, "suppliers_default", {"publish", "deny"});
      config_.suppliers_default.publish =
          patterns(*fallback, "suppliers_default", "publish", {">"});
      config_.suppliers_default.deny = patterns(*fallback, "suppliers_default", "deny", {});
    }
    return std::move(config_);
  }

 private:
  void read_consumers(const toml::table& consumers) {
    // toml++ keeps keys sorted; a consumer's index is its position in the file.
    std::vector<std::pair<const toml::key*, const toml::node*>> entries;
    for (auto&& [key, node] : consumers)
      entries.emplace_back(&key, &node);
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
      return position_less(a.first->source(), b.first->source());
    });
    for (const auto& [key, node] : entries) {
      const std::string path = join_path("consumers", key->str());
      // Remember every name written, even a faulty one, so routes naming it are not
      // reported a second time as naming an unknown consumer.
      known_consumers_.insert(std::string{key->str()});
      if (!valid_consumer_name(key->str())) {
        check_.error(*key, path + ": consumer name " + in_quotes(key->str()) +
                               " must be made of A-Z a-z 0-9 _ - (it becomes a metric label)");
      }
      const auto* table = node->as_table();
      if (!table) {
        check_.error(*node, path + ": expected a table ([" + path + "] with an endpoint), got " +
                                std::string{describe(node->type())});
        continue;
      }
      config_.consumers.push_back(read_consumer(*table, path, std::string{key->str()}));
    }
  }

  consumer_spec read_consumer(const toml::table& table, const std::string& path, std::string name) {
    consumer_spec spec;
    spec.name = std::move(name);
    check_.reject_unknown_keys(table, path, consumer_keys());
    // The integers and booleans come from their rows (config/settings.cpp).
    const auto refused = read_consumer_rows(check_, table, path, spec);
    read_addresses(table, path, spec);
    read_queue(table, path, spec);
    spec.tls = read_consumer_tls(check_, table, path, base_, creds_, spec.address.host);
    check_unacked_bytes(table, path, spec, refused);
    check_spool(table, path, spec);
    return spec;
  }

  // A group's members take turns with its frames: one spool per member would split a stream
  // across disks in an order nobody could restore, and one shared by the members is not built.
  void check_spool(const toml::table& table, const std::string& path, const consumer_spec& spec) {
    if (spec.spool_max_bytes == 0 || spec.endpoints.empty()) return;
    check_.error(*table.get("spool_max_bytes"),
                 path +
                     ".spool_max_bytes: a group (endpoints = [...]) cannot have a spool yet; "
                     "give the spool to a consumer with one endpoint");
  }

  // `endpoint`, or a group's `endpoints` and its `balance`: exactly one of the two keys.
  void read_addresses(const toml::table& table, const std::string& path, consumer_spec& spec) {
    const bool group = table.contains("endpoints");
    if (group && table.contains("endpoint")) {
      check_.error(*table.get("endpoints"),
                   path +
                       ".endpoints: a consumer has either endpoint (one) or endpoints (a "
                       "group), not both");
    }
    if (group) {
      read_members(table, path, spec);
    } else if (auto text = check_.string(table, path, "endpoint", presence::required)) {
      if (auto address = read_endpoint(*table.get("endpoint"), path + ".endpoint", *text))
        spec.address = std::move(*address);
    }
    if (auto text = check_.string(table, path, "balance")) {
      if (auto balance = consumers::balance_policy_names.parse(*text)) {
        spec.balance = *balance;
      } else {
        check_.error(*table.get("balance"), path + ".balance: unknown balance " + in_quotes(*text) +
                                                " (expected " +
                                                consumers::balance_policy_names.choices() + ")");
      }
      if (!group) {
        check_.error(*table.get("balance"),
                     path + ".balance: only means something with endpoints = [...] (a group)");
      }
    }
  }

  // What happens past the queue's limits.
  void read_queue(const toml::table& table, const std::string& path, consumer_spec& spec) {
    if (auto text = check_.string(table, path, "overflow")) {
      if (auto policy = consumers::overflow_policy_names.parse(*text)) {
        spec.overflow = *policy;
      } else {
        check_.error(*table.get("overflow"), path + ".overflow: unknown policy " +
                                                 in_quotes(*text) + " (expected " +
                                                 consumers::overflow_policy_names.choices() + ")");
      }
    }
  }

  // The bound on what an `ack = true` consumer may hold unacknowledged means nothing without it.
  void check_unacked_bytes(const toml::table& table, const std::string& path,
                           const consumer_spec& spec, std::span<const std::string_view> refused) {
    if (spec.ack || !table.contains("max_unacked_bytes")) return;
    if (std::find(refused.begin(), refused.end(), "max_unacked_bytes") != refused.end()) return;
    check_.error(*table.get("max_unacked_bytes"),
                 path + ".max_unacked_bytes: only means something with ack = true");
  }

  std::optional<net::endpoint> read_endpoint(const toml::node& where, const std::string& path,
                                             const std::string& text) {
    auto address = net::parse_endpoint(text);
    if (!address) {
      check_.error(where, path + ": " + in_quotes(text) +
                              " is not a literal IPv4:port or [IPv6]:port address");
      return std::nullopt;
    }
    if (address->port == 0) {
      check_.error(where, path + ": port 0 cannot be dialled");
      return std::nullopt;
    }
    return address;
  }

  // A group's endpoints: at least one, each an endpoint, none twice. The spec's `address` is
  // the first (what TLS checks the default server name against).
  void read_members(const toml::table& table, const std::string& path, consumer_spec& spec) {
    const auto* list = check_.array(table, path, "endpoints", presence::required);
    if (!list) return;
    if (list->empty()) check_.error(*list, path + ".endpoints: must name at least one endpoint");
    for (std::size_t i = 0; i < list->size(); ++i) {
      const std::string element = path + ".endpoints[" + std::to_string(i) + ']';
      const auto* text = (*list)[i].as_string();
      if (!text) {
        check_.error((*list)[i], element + ": expected an endpoint (a string), got " +
                                     std::string{describe((*list)[i].type())});
        continue;
      }
      auto address = read_endpoint((*list)[i], element, text->get());
      if (!address) continue;
      if (std::find(spec.endpoints.begin(), spec.endpoints.end(), *address) !=
          spec.endpoints.end()) {
        check_.error((*list)[i], element + ": " + in_quotes(text->get()) + " is listed twice");
        continue;
      }
      spec.endpoints.push_back(std::move(*address));
    }
    if (!spec.endpoints.empty()) spec.address = spec.endpoints.front();
  }

  void read_routes(const toml::array& routes) {
    for (std::size_t i = 0; i < routes.size(); ++i) {
      const std::string path = "routes[" + std::to_string(i) + ']';
      const auto* table = routes[i].as_table();
      if (!table) {
        check_.error(routes[i], path + ": expected a table ([[routes]] with match and to), got " +
                                    std::string{describe(routes[i].type())});
        continue;
      }
      config_.routes.push_back(read_route(*table, path));
    }
  }

  route_spec read_route(const toml::table& table, const std::string& path) {
    route_spec spec;
    check_.reject_unknown_keys(table, path, {"match", "to"});
    if (auto match = check_.string(table, path, "match", presence::required)) {
      if (auto why = routing::pattern_error(*match)) {
        check_.error(*table.get("match"),
                     path + ".match: invalid pattern " + in_quotes(*match) + ": " + *why);
      }
      spec.match = std::move(*match);
    }
    const auto* to = check_.array(table, path, "to", presence::required);
    if (!to) return spec;
    if (to->empty()) check_.error(*to, path + ".to: must name at least one consumer");
    for (std::size_t i = 0; i < to->size(); ++i) {
      const std::string element = path + ".to[" + std::to_string(i) + ']';
      const auto* name = (*to)[i].as_string();
      if (!name) {
        check_.error((*to)[i], element + ": expected a consumer name (a string), got " +
                                   std::string{describe((*to)[i].type())});
        continue;
      }
      if (std::find(spec.to.begin(), spec.to.end(), name->get()) != spec.to.end()) {
        check_.error(*name, element + ": consumer " + in_quotes(name->get()) + " is listed twice");
        continue;
      }
      check_known_consumer(*name, element);
      spec.to.push_back(name->get());
    }
    return spec;
  }

  // [suppliers.NAME] identity = "...", publish = [...], deny = [...], in file order.
  void read_suppliers(const toml::table& suppliers) {
    std::vector<std::pair<const toml::key*, const toml::node*>> entries;
    for (auto&& [key, node] : suppliers)
      entries.emplace_back(&key, &node);
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
      return position_less(a.first->source(), b.first->source());
    });
    std::set<std::string> identities;
    for (const auto& [key, node] : entries) {
      const std::string path = join_path("suppliers", key->str());
      if (!valid_consumer_name(key->str())) {
        check_.error(*key, path + ": supplier name " + in_quotes(key->str()) +
                               " must be made of A-Z a-z 0-9 _ - (it becomes a metric label)");
      }
      if (key->str() == routing::publish_drop_counters::default_name) {
        check_.error(*key, path +
                               ": \"default\" is the label of [suppliers_default]; name the "
                               "supplier otherwise");
      }
      const auto* table = node->as_table();
      if (!table) {
        check_.error(*node,
                     path + ": expected a table, got " + std::string{describe(node->type())});
        continue;
      }
      check_.reject_unknown_keys(*table, path, {"identity", "publish", "deny"});
      routing::publish_rule rule;
      rule.name = std::string{key->str()};
      if (auto identity = check_.string(*table, path, "identity", presence::required)) {
        if (identity->empty()) {
          check_.error(*table->get("identity"), path + ".identity: must not be empty");
        } else if (!identities.insert(*identity).second) {
          check_.error(*table->get("identity"), path + ".identity: " + in_quotes(*identity) +
                                                    " is already another supplier's identity");
        }
        rule.identity = std::move(*identity);
      }
      rule.publish = patterns(*table, path, "publish", {});
      rule.deny = patterns(*table, path, "deny", {});
      config_.suppliers.push_back(std::move(rule));
    }
  }

  // An array of routing patterns; `absent` when the key is not there.
  std::vector<std::string> patterns(const toml::table& table, const std::string& path,
                                    std::string_view key, std::vector<std::string> absent) {
    const auto* list = check_.array(table, path, key);
    if (!list) return absent;
    std::vector<std::string> out;
    for (std::size_t i = 0; i < list->size(); ++i) {
      const std::string element = path + "." + std::string{key} + "[" + std::to_string(i) + ']';
      const auto* text = (*list)[i].as_string();
      if (!text) {
        check_.error((*list)[i], element + ": expected a pattern (a string), got " +
                                     std::string{describe((*list)[i].type())});
        continue;
      }
      if (auto why = routing::pattern_error(text->get())) {
        check_.error(*text, element + ": invalid pattern " + in_quotes(text->get()) + ": " + *why);
        continue;
      }
      out.push_back(text->get());
    }
    return out;
  }

  void read_dead_letter(const toml::table& table) {
    check_.reject_unknown_keys(table, "dead_letter", {"consumer"});
    if (auto name = check_.string(table, "dead_letter", "consumer", presence::required)) {
      check_known_consumer(*table.get("consumer")->as_string(), "dead_letter.consumer");
      config_.dead_letter = std::move(*name);
    }
  }

  void check_known_consumer(const toml::value<std::string>& name, const std::string& path) {
    if (known_consumers_.count(name.get())) return;
    std::string message = path + ": unknown consumer " + in_quotes(name.get());
    // A typo is the usual cause; point at the nearest name when one is close.
    if (const std::string* best = suggestion_.find(known_consumers_, name.get()))
      message += " (did you mean " + in_quotes(*best) + "?)";
    check_.error(name, std::move(message));
  }

  toml_checker& check_;
  std::filesystem::path base_;
  const credentials& creds_;
  routes_config config_;
  std::set<std::string, std::less<>> known_consumers_;
  nearest_name suggestion_;  // one work budget for the whole file
};

}  // namespace

bool valid_consumer_name(std::string_view name) noexcept {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

routes_load_result parse_routes_config(std::string_view toml_text, const std::string& source_name,
                                       const credentials& creds) {
  toml_checker check{source_name};
  routes_load_result result;
  if (auto root = check.parse(toml_text)) {
    std::error_code ec;
    const auto file = std::filesystem::absolute(source_name, ec);
    routing_reader reader{check, (ec ? std::filesystem::path{source_name} : file).parent_path(),
                          creds};
    auto config = reader.read(*root);
    if (!check.has_errors()) result.config = std::move(config);
  }
  result.errors = check.take_errors();
  return result;
}

routes_load_result load_routes_file(const std::filesystem::path& file, const credentials& creds) {
  toml_checker check{file.string()};
  if (auto text = read_config_text(file, check)) {
    auto result = parse_routes_config(*text, file.string(), creds);
    result.sha256 = sha256_hex(*text);  // the bytes parsed, not a second read that may differ
    return result;
  }
  routes_load_result result;
  result.errors = check.take_errors();
  return result;
}

}  // namespace gatewayd::config
