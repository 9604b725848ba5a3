#include "config/service_config.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <utility>

#include "config/config_text.hpp"
#include "config/routes_loader.hpp"
#include "config/settings.hpp"
#include "config/tls_table_reader.hpp"
#include "config/toml_checker.hpp"

namespace gatewayd::config {
namespace {

namespace fs = std::filesystem;
using presence = toml_checker::presence;

// Keys that chose a pattern to compare (the comparison is bench/model_harness's now): a file
// that still names one fails to load with what replaced it, rather than with "unknown key".
constexpr std::array<std::pair<std::string_view, std::string_view>, 2> removed_gateway_keys{{
    {"concurrency", "gatewayd always runs Leader/Followers"},
    {"consumer_drain", "gatewayd always drains each consumer on its own strand"},
}};

// What reading gatewayd.toml yields even when it has errors: load_full_config still wants
// the routes file, to report its errors in the same run.
struct service_reading {
  service_config config;
  std::optional<fs::path> routes_file_as_named;  // relative to the working directory
  std::vector<config_error> errors;
};

class service_reader {
 public:
  service_reader(toml_checker& check, const fs::path& file, const credentials& creds)
      : check_(check), file_(file), creds_(creds) {
    config_.config_file = absolute_normal(file);
  }

  service_reading read(const toml::table& root) {
    check_.reject_unknown_keys(root, "", {"gateway", "tls", "metrics", "log"});
    if (const auto* gateway = check_.table(root, "", "gateway")) {
      read_gateway(*gateway);
    } else if (!root.contains("gateway")) {
      check_.file_error("missing required table [gateway] (it names routes_file)");
    }
    if (const auto* tls = check_.table(root, "", "tls"))
      read_tls_table(check_, *tls, file_, creds_, config_);
    if (const auto* metrics = check_.table(root, "", "metrics")) read_metrics(*metrics);
    if (const auto* log = check_.table(root, "", "log")) read_log(*log);
    check_listeners_differ(root);
    return {std::move(config_), std::move(routes_file_), {}};
  }

 private:
  std::optional<net::endpoint> listen_endpoint(const toml::table& t, std::string_view path,
                                               std::string_view key) {
    auto text = check_.string(t, path, key);
    if (!text) return std::nullopt;
    auto address = net::parse_endpoint(*text);
    if (!address) {
      check_.error(*t.get(key), join_path(path, key) + ": " + in_quotes(*text) +
                                    " is not a literal IPv4:port or [IPv6]:port address");
    }
    return address;
  }

  // Whether `key` holds a valid value, or is absent (its default is): cross-checks compare only
  // those, so one bad value is not reported twice.
  bool usable(const toml::table& t, std::string_view key) const {
    return !t.contains(key) || std::find(refused_.begin(), refused_.end(), key) == refused_.end();
  }

  void check_reconnect(const toml::table& t) {
    if (!usable(t, "reconnect_initial_ms") || !usable(t, "reconnect_max_ms")) return;
    if (config_.reconnect_max >= config_.reconnect_initial) return;
    const auto initial_ms = std::to_string(config_.reconnect_initial.count());
    const auto max_ms = std::to_string(config_.reconnect_max.count());
    if (t.contains("reconnect_max_ms")) {
      check_.error(*t.get("reconnect_max_ms"), "gateway.reconnect_max_ms: " + max_ms +
                                                   " is below reconnect_initial_ms (" + initial_ms +
                                                   ')');
    } else {
      check_.error(*t.get("reconnect_initial_ms"), "gateway.reconnect_initial_ms: " + initial_ms +
                                                       " is above reconnect_max_ms (" + max_ms +
                                                       ", its default)");
    }
  }

  // The gateway table's keys: a removed one is reported with its replacement, not as unknown.
  void reject_removed_and_unknown_keys(const toml::table& t) {
    std::vector<std::string_view> removed;
    for (const auto& [key, why] : removed_gateway_keys) {
      if (!t.contains(key)) continue;
      removed.push_back(key);
      check_.error(*t.get(key), "[gateway] " + std::string{key} +
                                    " was removed: " + std::string{why} +
                                    "; the other models are in bench/model_harness "
                                    "(docs/benchmarks.md)");
    }
    check_.reject_unknown_keys(t, "gateway", keys_of("gateway"), removed);
  }

  // The ledger bound's floor, where its row's range says why.
  void check_confirm_ledger(const toml::table& t) {
    const auto v = static_cast<std::int64_t>(config_.max_confirm_ledger_bytes);
    const auto floor = setting_at("gateway", "max_confirm_ledger_bytes").range.nonzero_min;
    if (!t.contains("max_confirm_ledger_bytes") || !usable(t, "max_confirm_ledger_bytes")) return;
    if (v == 0 || v >= floor) return;
    check_.error(*t.get("max_confirm_ledger_bytes"),
                 "gateway.max_confirm_ledger_bytes: " + std::to_string(v) + " is below " +
                     std::to_string(floor) +
                     " (1 MiB): every confirm-mode supplier would wait on it; 0 = no bound");
  }

  // The integers and booleans come from their rows (config/settings.cpp); what is left here is
  // the keys with rules of their own and the checks between keys.
  void read_gateway(const toml::table& t) {
    reject_removed_and_unknown_keys(t);
    refused_ = read_rows(check_, t, "gateway", config_);
    if (auto e = listen_endpoint(t, "gateway", "supplier_listen")) config_.supplier_listen = *e;
    if (auto name = check_.string(t, "gateway", "routes_file", presence::required)) {
      if (name->empty()) {
        check_.error(*t.get("routes_file"), "gateway.routes_file: must not be empty");
      } else {
        // Relative to gatewayd.toml, so the pair of files can move together.
        const fs::path named{*name};
        routes_file_ =
            (named.is_absolute() ? named : file_.parent_path() / named).lexically_normal();
        config_.routes_file = absolute_normal(*routes_file_);
      }
    }
    read_spool_dir(t);
    check_confirm_ledger(t);
    check_reconnect(t);
    byte_cap(t, "max_queued_bytes", "queued", config_.max_queued_bytes);
    byte_cap(t, "max_partial_frame_bytes", "received", config_.max_partial_frame_bytes);
    if (const auto* allow = check_.array(t, "gateway", "allow")) {
      read_blocks(*allow, "gateway.allow", config_.allow);
    }
    read_proxy_protocol(t);
  }

  // Relative to gatewayd.toml, as routes_file. Named: --check makes sure it can be used (it is
  // a folder gatewayd may write, or one it may create), without creating it.
  void read_spool_dir(const toml::table& t) {
    const auto name = check_.string(t, "gateway", "spool_dir");
    const fs::path named{name ? *name : std::string{"spool"}};
    config_.spool_dir = absolute_normal(
        (named.is_absolute() ? named : file_.parent_path() / named).lexically_normal());
    if (!name) return;
    if (name->empty()) {
      check_.error(*t.get("spool_dir"), "gateway.spool_dir: must not be empty");
      return;
    }
    if (const std::string why = spool_dir_unusable(config_.spool_dir); !why.empty())
      check_.error(*t.get("spool_dir"), "gateway.spool_dir: " + in_quotes(*name) + ": " + why);
  }

  // Why `dir` cannot hold spools: not a folder, or one (or the nearest existing parent it would
  // be created in) gatewayd may not write. Empty when it can.
  static std::string spool_dir_unusable(const fs::path& dir) {
    std::error_code ec;
    fs::path at = dir;
    while (!fs::exists(at, ec) && at.has_parent_path() && at != at.parent_path())
      at = at.parent_path();
    if (!fs::is_directory(at, ec)) return at.string() + " is not a folder";
    if (::access(at.c_str(), W_OK | X_OK) != 0) {
      return (at == dir ? std::string{"cannot write in it"}
                        : "cannot create it in " + at.string()) +
             " (" + std::generic_category().message(errno) + ")";
    }
    return {};
  }

  // A gateway-wide byte cap: 0 = none; otherwise, when max_payload is valid, at least that, or
  // the largest frame could never be `what` (queued, received).
  void byte_cap(const toml::table& t, std::string_view key, std::string_view what,
                std::uint64_t out) {
    if (!t.contains(key) || !usable(t, key) || !usable(t, "max_payload")) return;
    if (out == 0 || out >= config_.max_payload) return;
    check_.error(*t.get(key), "gateway." + std::string{key} + ": " + std::to_string(out) +
                                  " is below max_payload (" + std::to_string(config_.max_payload) +
                                  "): the largest frame could never be " + std::string{what});
  }

  // A list of CIDR blocks (gateway.allow, gateway.proxy_from, metrics.allow); `key` is its path.
  void read_blocks(const toml::array& list, std::string_view key,
                   std::vector<net::cidr_block>& out) {
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string path = std::string{key} + '[' + std::to_string(i) + ']';
      const auto* text = list[i].as_string();
      if (!text) {
        check_.error(list[i], path + ": expected a CIDR block (a string), got " +
                                  std::string{describe(list[i].type())});
        continue;
      }
      std::string why;
      if (auto block = net::parse_cidr(text->get(), &why)) {
        out.push_back(*block);
      } else {
        check_.error(*text, path + ": " + in_quotes(text->get()) + ": " + why);
      }
    }
  }

  // A PROXY header is believed only from proxy_from: trusted from anyone, it would let any
  // supplier claim any address (and pass `allow` with it).
  void read_proxy_protocol(const toml::table& t) {
    if (const auto* from = check_.array(t, "gateway", "proxy_from")) {
      config_.proxy_from.clear();
      read_blocks(*from, "gateway.proxy_from", config_.proxy_from);
      if (from->empty() && config_.proxy_protocol) {
        check_.error(*from, "gateway.proxy_from: empty, so no balancer may send the PROXY header");
      }
    }
  }

  void read_metrics(const toml::table& t) {
    check_.reject_unknown_keys(t, "metrics", keys_of("metrics"));
    read_rows(check_, t, "metrics", config_);
    if (auto e = listen_endpoint(t, "metrics", "listen")) config_.metrics_listen = *e;
    if (const auto* allow = check_.array(t, "metrics", "allow")) {
      // Empty would admit nobody (or, read as gateway.allow is, everybody): say which is meant.
      if (allow->empty()) {
        check_.error(*allow,
                     "metrics.allow: empty; list the networks that may reach the metrics "
                     "listener (\"0.0.0.0/0\" admits every IPv4 client)");
        return;
      }
      config_.metrics_allow.clear();
      read_blocks(*allow, "metrics.allow", config_.metrics_allow);
    }
  }

  void read_log(const toml::table& t) {
    check_.reject_unknown_keys(t, "log", keys_of("log"));
    if (auto text = check_.string(t, "log", "level")) {
      if (!gatewayd::log::parse_level(*text, config_.log_level)) {
        check_.error(*t.get("level"), "log.level: unknown level " + in_quotes(*text) +
                                          " (expected debug, info, warning or error)");
      }
    }
  }

  // Two listeners on one port would make the second bind fail at start-up; say so now.
  void check_listeners_differ(const toml::table& root) {
    if (!config_.metrics_enabled || config_.metrics_listen.port == 0) return;
    if (config_.metrics_listen != config_.supplier_listen) return;
    const toml::node* where = root.at_path("metrics.listen").node();
    if (!where) where = root.at_path("gateway.supplier_listen").node();
    const std::string message = "metrics.listen: " + config_.metrics_listen.to_string() +
                                " is also gateway.supplier_listen";
    if (where) {
      check_.error(*where, message);
    } else {
      check_.file_error(message);
    }
  }

  toml_checker& check_;
  const fs::path& file_;
  const credentials& creds_;
  service_config config_;
  std::optional<fs::path> routes_file_;
  std::vector<std::string_view> refused_;  // [gateway] keys there but refused
};

}  // namespace

std::vector<net::cidr_block> loopback_blocks() {
  return {*net::parse_cidr("127.0.0.0/8"), *net::parse_cidr("::1/128")};
}

namespace {

service_reading read_service_text(std::string_view text, const fs::path& file,
                                  const credentials& creds) {
  toml_checker check{file.string()};
  service_reading reading;
  if (auto root = check.parse(text)) {
    service_reader reader{check, file, creds};
    reading = reader.read(*root);
  }
  reading.errors = check.take_errors();
  return reading;
}

}  // namespace

service_load_result parse_service_config(std::string_view toml_text, const fs::path& file,
                                         const credentials& creds) {
  auto reading = read_service_text(toml_text, file, creds);
  service_load_result result;
  result.errors = std::move(reading.errors);
  if (result.errors.empty()) result.config = std::move(reading.config);
  return result;
}

service_load_result load_service_config(const fs::path& file, const credentials& creds) {
  toml_checker check{file.string()};
  if (auto text = read_config_text(file, check)) return parse_service_config(*text, file, creds);
  return {std::nullopt, check.take_errors()};
}

full_load_result load_full_config(const fs::path& file, const credentials& creds) {
  full_load_result result;
  toml_checker check{file.string()};
  const auto text = read_config_text(file, check);
  if (!text) {
    result.errors = check.take_errors();
    return result;
  }
  auto service = read_service_text(*text, file, creds);
  result.errors = std::move(service.errors);
  if (!service.routes_file_as_named) return result;
  auto routes = load_routes_file(*service.routes_file_as_named, creds);
  result.errors.insert(result.errors.end(), routes.errors.begin(), routes.errors.end());
  if (result.errors.empty()) {
    result.config =
        full_config{std::move(service.config), std::move(*routes.config), std::move(routes.sha256)};
  }
  return result;
}

}  // namespace gatewayd::config
