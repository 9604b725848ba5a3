// The settings table is the one place a gatewayd.toml key is classified: every key the reader
// accepts is in it, each key drives exactly its own field, nothing in service_config escapes it,
// and docs/configuration.md and the sample etc/gatewayd.toml say for each key what it does.
#define BOOST_TEST_MODULE settings
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "config/service_config.hpp"
#include "config/settings.hpp"

using namespace gatewayd::config;

namespace {

// A valid value other than the default for each key, as one TOML line of its table.
const std::map<std::string, std::string> non_default = {
    {"gateway.supplier_listen", "supplier_listen = \"127.0.0.1:7999\""},
    {"gateway.threads", "threads = 3"},
    {"gateway.idle_poll_us", "idle_poll_us = 25"},
    {"gateway.max_payload", "max_payload = 4096"},
    {"gateway.routes_file", "routes_file = \"other.toml\""},
    {"gateway.idle_timeout_ms", "idle_timeout_ms = 1234"},
    {"gateway.max_supplier_connections", "max_supplier_connections = 77"},
    {"gateway.max_handshaking_connections", "max_handshaking_connections = 33"},
    {"gateway.drain_timeout_ms", "drain_timeout_ms = 250"},
    {"gateway.lame_duck_ms", "lame_duck_ms = 1500"},
    {"gateway.reconnect_initial_ms", "reconnect_initial_ms = 50"},
    {"gateway.reconnect_max_ms", "reconnect_max_ms = 30000"},
    {"gateway.max_queued_bytes", "max_queued_bytes = 2097152"},
    {"gateway.max_partial_frame_bytes", "max_partial_frame_bytes = 4194304"},
    {"gateway.allow", "allow = [\"10.0.0.0/8\"]"},
    {"gateway.proxy_protocol", "proxy_protocol = true"},
    {"gateway.proxy_from", "proxy_from = [\"10.9.0.0/16\"]"},
    {"gateway.slow_consumer_ms", "slow_consumer_ms = 750"},
    {"gateway.consumer_connect_timeout_ms", "consumer_connect_timeout_ms = 1500"},
    {"gateway.consumer_timeout_ms", "consumer_timeout_ms = 0"},
    {"gateway.max_unconfirmed_frames", "max_unconfirmed_frames = 500"},
    {"gateway.confirm_timeout_ms", "confirm_timeout_ms = 2500"},
    {"gateway.max_confirm_ledger_bytes", "max_confirm_ledger_bytes = 2097152"},
    // [tls] needs cert and key together: each line changes one key of tls_base (below).
    {"tls.cert", "cert = \"other.crt\"\nkey = \"g.key\""},
    {"tls.key", "cert = \"g.crt\"\nkey = \"other.key\""},
    {"tls.client_ca", "cert = \"g.crt\"\nkey = \"g.key\"\nclient_ca = \"ca.crt\""},
    // crl goes with client_ca: it changes one key of mutual_base (below).
    {"tls.crl", "cert = \"g.crt\"\nkey = \"g.key\"\nclient_ca = \"ca.crt\"\ncrl = \"ca.crl\""},
    {"tls.allow_readable_key", "cert = \"g.crt\"\nkey = \"g.key\"\nallow_readable_key = true"},
    {"tls.handshake_timeout_ms", "cert = \"g.crt\"\nkey = \"g.key\"\nhandshake_timeout_ms = 500"},
    {"tls.ktls", "cert = \"g.crt\"\nkey = \"g.key\"\nktls = \"off\""},
    {"metrics.listen", "listen = \"127.0.0.1:9999\""},
    {"metrics.enabled", "enabled = false"},
    {"metrics.allow", "allow = [\"10.1.2.3\", \"127.0.0.1\"]"},
    {"log.level", "level = \"debug\""},
};

// gatewayd.toml with the required routes_file (unless `line` sets it) and `line` in `section`.
service_config parse_with(const std::string& section, const std::string& line) {
  std::string text = "[gateway]\n";
  if (line.rfind("routes_file", 0) != 0) text += "routes_file = \"r\"\n";
  if (section != "gateway") text += "[" + section + "]\n";
  text += line + "\n";
  const auto r = parse_service_config(text, "/etc/gatewayd/gatewayd.toml");
  for (const auto& e : r.errors)
    BOOST_TEST_MESSAGE(e.to_string());
  BOOST_REQUIRE(r.config.has_value());
  return *r.config;
}

std::vector<std::string> paths(const std::vector<const setting*>& v) {
  std::vector<std::string> out;
  for (const auto* s : v)
    out.push_back(s->path());
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  BOOST_REQUIRE_MESSAGE(in, "cannot read " << path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_key_changes_exactly_its_own_setting) {
  const service_config plain = parse_with("gateway", "threads = 0");
  const service_config tls_base = parse_with("tls", "cert = \"g.crt\"\nkey = \"g.key\"");
  const service_config mutual_base =
      parse_with("tls", "cert = \"g.crt\"\nkey = \"g.key\"\nclient_ca = \"ca.crt\"");
  BOOST_TEST(plan_reload(plain, plain).live.empty());
  BOOST_TEST(plan_reload(plain, plain).restart.empty());
  std::set<std::string> covered;
  for (const auto& s : settings()) {
    BOOST_TEST_CONTEXT("setting " << s.path()) {
      const auto it = non_default.find(s.path());
      BOOST_REQUIRE_MESSAGE(it != non_default.end(), "no sample value for a new setting");
      const service_config& base = s.path() == "tls.crl" ? mutual_base
                                   : s.section == "tls"  ? tls_base
                                                         : plain;
      const auto next = parse_with(std::string{s.section}, it->second);
      const auto plan = plan_reload(base, next);
      const auto changed = s.effect == reload_effect::restart ? plan.restart : plan.live;
      BOOST_TEST(paths(changed) == std::vector<std::string>{s.path()},
                 boost::test_tools::per_element());
      BOOST_TEST((plan.live.size() + plan.restart.size()) == 1u);
      BOOST_TEST(!plan.unclassified);
      BOOST_TEST(s.text(base) != s.text(next));
      covered.insert(s.path());
    }
  }
  BOOST_TEST(covered.size() == non_default.size());
}

// The [tls] paths move with a reload while the listener keeps TLS; turning TLS on or off is a
// restart, for every key that changes with it.
BOOST_AUTO_TEST_CASE(tls_paths_reload_while_tls_stays_on) {
  const service_config plain = parse_with("gateway", "threads = 0");
  const service_config tls = parse_with("tls", "cert = \"g.crt\"\nkey = \"g.key\"");
  const service_config moved =
      parse_with("tls", "cert = \"new/g.crt\"\nkey = \"new/g.key\"\nclient_ca = \"ca.crt\"");
  const std::vector<std::string> files{"tls.cert", "tls.key", "tls.client_ca"};
  BOOST_TEST(paths(plan_reload(tls, moved).live) == files, boost::test_tools::per_element());
  BOOST_TEST(plan_reload(tls, moved).restart.empty());
  BOOST_TEST(paths(plan_reload(moved, tls).live) == files, boost::test_tools::per_element());
  BOOST_TEST(paths(plan_reload(plain, moved).restart) == files, boost::test_tools::per_element());
  BOOST_TEST(plan_reload(plain, moved).live.empty());
  BOOST_TEST(paths(plan_reload(moved, plain).restart) == files, boost::test_tools::per_element());
  BOOST_TEST(plan_reload(moved, plain).live.empty());
}

BOOST_AUTO_TEST_CASE(a_field_no_setting_covers_is_caught) {
  const service_config running = parse_with("gateway", "threads = 0");
  service_config moved = running;
  // config_file names where the file is, not a key in it: not a change.
  moved.config_file = "/elsewhere/gatewayd.toml";
  BOOST_TEST(!plan_reload(running, moved).unclassified);
  // The table without its `threads` row stands for a table someone forgot a field in: a reload
  // that changes that field must be refused as unclassified, not silently ignored.
  std::vector<setting> forgetful;
  for (const auto& s : settings()) {
    if (s.path() != "gateway.threads") forgetful.push_back(s);
  }
  const auto next = parse_with("gateway", "threads = 3");
  BOOST_TEST(plan_reload(running, next, forgetful).unclassified);
  BOOST_TEST(!plan_reload(running, next).unclassified);
}

BOOST_AUTO_TEST_CASE(the_reader_accepts_exactly_the_table_keys) {
  for (const std::string section : {"gateway", "metrics", "log"}) {
    const auto r = parse_service_config(
        "[gateway]\nroutes_file = \"r\"\n" +
            (section == "gateway" ? std::string{} : "[" + section + "]\n") + "no_such_key = 1\n",
        "/etc/gatewayd/gatewayd.toml");
    BOOST_REQUIRE(r.errors.size() == 1u);
    std::string expected;
    for (const auto key : keys_of(section)) {
      if (!expected.empty()) expected += ", ";
      expected += key;
    }
    BOOST_TEST(r.errors[0].message.find("(expected " + expected + ")") != std::string::npos,
               r.errors[0].message);
  }
}

BOOST_AUTO_TEST_CASE(the_configuration_doc_says_what_each_key_does_on_reload) {
  const std::string doc = read_file(GATEWAYD_SOURCE_DIR "/docs/configuration.md");
  std::map<std::string, std::string> reload_column;  // "gateway.threads" -> "restart"
  std::string section;
  std::istringstream lines(doc);
  const std::regex heading(R"(^### \[(\w+)\])");
  const std::regex row(R"(^\| `(\w+)` \|.*\| ([^|]*) \|$)");
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (line.rfind("## ", 0) == 0) section.clear();  // the routes file's part begins
    if (std::regex_search(line, m, heading) && !keys_of(m[1].str()).empty()) section = m[1];
    if (std::regex_match(line, m, row) && !section.empty())
      reload_column[section + "." + m[1].str()] = m[2];
  }
  for (const auto& s : settings()) {
    BOOST_TEST_CONTEXT("docs/configuration.md, " << s.path()) {
      BOOST_REQUIRE(reload_column.count(s.path()) == 1u);
      BOOST_TEST((reload_column[s.path()] == "restart") == (s.effect == reload_effect::restart),
                 "reload column: " << reload_column[s.path()]);
    }
  }
  BOOST_TEST(reload_column.size() == settings().size());
}

BOOST_AUTO_TEST_CASE(the_sample_config_marks_every_restart_key) {
  std::istringstream lines(read_file(GATEWAYD_SOURCE_DIR "/etc/gatewayd.toml"));
  std::string section;
  std::string comment;  // the comment block above the current key (shared by keys under it)
  std::map<std::string, bool> marked;
  const std::regex table(R"(^\[(\w+)\])");
  const std::regex key(R"(^(\w+) = )");
  // An optional table the sample shows commented out ("# [tls]"), with its keys ("# cert = ").
  const std::regex commented_table(R"(^# \[(\w+)\]$)");
  const std::regex commented_key(R"(^# (\w+) = )");
  bool commented = false;
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, table) || std::regex_search(line, m, commented_table)) {
      section = m[1];
      commented = line[0] == '#';
      comment.clear();
    } else if (commented && std::regex_search(line, m, commented_key)) {
      marked[section + "." + m[1].str()] = comment.find("[restart]") != std::string::npos;
    } else if (line.rfind("#", 0) == 0) {
      comment += line;
    } else if (std::regex_search(line, m, key)) {
      marked[section + "." + m[1].str()] = comment.find("[restart]") != std::string::npos;
    } else if (line.empty()) {
      comment.clear();
    }
  }
  for (const auto& s : settings()) {
    BOOST_TEST_CONTEXT("etc/gatewayd.toml, " << s.path()) {
      BOOST_REQUIRE(marked.count(s.path()) == 1u);
      BOOST_TEST(marked[s.path()] == (s.effect == reload_effect::restart));
    }
  }
}
