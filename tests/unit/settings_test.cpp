// The settings table is the one place a gatewayd.toml key is classified: every key the reader
// accepts is in it, each key drives exactly its own field, nothing in service_config escapes it,
// and docs/configuration.md and the sample etc/gatewayd.toml say for each key what it does.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <fstream>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "config/routes_loader.hpp"
#include "config/service_config.hpp"
#include "config/settings.hpp"

using namespace gatewayd::config;

namespace {

// A valid value other than the default for each key that is not a plain integer or boolean, as
// one TOML line of its table (the plain ones: sample_line).
const std::map<std::string, std::string> non_default = {
    {"gateway.supplier_listen", "supplier_listen = \"127.0.0.1:7999\""},
    {"gateway.routes_file", "routes_file = \"other.toml\""},
    {"gateway.allow", "allow = [\"10.0.0.0/8\"]"},
    {"gateway.proxy_from", "proxy_from = [\"10.9.0.0/16\"]"},
    {"gateway.spool_dir", "spool_dir = \"/tmp\""},
    // [tls] needs cert and key together: each line changes one key of tls_base (below).
    {"tls.cert", "cert = \"other.crt\"\nkey = \"g.key\""},
    {"tls.key", "cert = \"g.crt\"\nkey = \"other.key\""},
    {"tls.client_ca", "cert = \"g.crt\"\nkey = \"g.key\"\nclient_ca = \"ca.crt\""},
    // crl goes with client_ca: it changes one key of mutual_base (below).
    {"tls.crl", "cert = \"g.crt\"\nkey = \"g.key\"\nclient_ca = \"ca.crt\"\ncrl = \"ca.crl\""},
    {"tls.ktls", "cert = \"g.crt\"\nkey = \"g.key\"\nktls = \"off\""},
    {"metrics.listen", "listen = \"127.0.0.1:9999\""},
    {"metrics.allow", "allow = [\"10.1.2.3\", \"127.0.0.1\"]"},
    {"log.level", "level = \"debug\""},
};

// The line that sets `s` to a valid value other than its default: a boolean flipped, an integer
// one past its default (within its range), anything else from non_default.
std::string sample_line(const setting& s) {
  const service_config defaults;
  std::string line;
  if (s.type == "boolean") {
    line = std::string{s.key} + " = " + (s.text(defaults) == "true" ? "false" : "true");
  } else if (s.range.max != 0) {
    const auto d = std::stoll(s.text(defaults));
    line = std::string{s.key} + " = " + std::to_string(d < s.range.max ? d + 1 : d - 1);
  } else {
    const auto it = non_default.find(s.path());
    BOOST_REQUIRE_MESSAGE(it != non_default.end(), "no sample value for a new setting");
    return it->second;
  }
  return s.section == "tls" ? "cert = \"g.crt\"\nkey = \"g.key\"\n" + line : line;
}

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

// What docs' reload column says, as an effect: the words of each, anything else a live key.
reload_effect reload_words(const std::string& cell) {
  const std::map<std::string, reload_effect> words{
      {"restart", reload_effect::restart},
      {"live while TLS stays on", reload_effect::live_while_tls},
      {"in place", reload_effect::in_place},
      {"redial", reload_effect::redial},
      {"replaced", reload_effect::replace},
      {"members matched by endpoint", reload_effect::members},
  };
  const auto it = words.find(cell);
  return it == words.end() ? reload_effect::live : it->second;
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
      const service_config& base = s.path() == "tls.crl" ? mutual_base
                                   : s.section == "tls"  ? tls_base
                                                         : plain;
      const auto next = parse_with(std::string{s.section}, sample_line(s));
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
  BOOST_TEST(covered.size() == settings().size());
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

// Each integer row's bounds are the reader's: one below and one above are refused, with them.
BOOST_AUTO_TEST_CASE(the_reader_holds_each_integer_to_its_row_bounds) {
  // The errors of gatewayd.toml (`routes` false) or of a routes file.
  const auto refuses = [](bool routes, const std::string& text, const std::string& message) {
    const auto errors = routes ? parse_routes_config(text, "/etc/gatewayd/routes.toml").errors
                               : parse_service_config(text, "/etc/gatewayd/gatewayd.toml").errors;
    for (const auto& e : errors) {
      if (e.message == message) return true;
    }
    return false;
  };
  const auto check = [&](const std::string& path, const std::string& head, const auto& row) {
    const std::string range = " is out of range (" + std::to_string(row.range.min) + ".." +
                              std::to_string(row.range.max) + ')';
    std::vector<std::int64_t> outside;
    if (row.range.min > std::numeric_limits<std::int64_t>::min())
      outside.push_back(row.range.min - 1);
    if (row.range.max < std::numeric_limits<std::int64_t>::max())
      outside.push_back(row.range.max + 1);
    for (const std::int64_t v : outside) {
      BOOST_TEST(refuses(path.rfind("consumers.", 0) == 0,
                         head + std::string{row.key} + " = " + std::to_string(v) + "\n",
                         path + "." + std::string{row.key} + ": " + std::to_string(v) + range),
                 path << "." << row.key << " = " << v);
    }
  };
  for (const auto& s : settings()) {
    if (s.range.max == 0) continue;
    std::string head = "[gateway]\nroutes_file = \"r\"\n";
    if (s.section == "tls") head += "[tls]\ncert = \"g.crt\"\nkey = \"g.key\"\n";
    check(std::string{s.section}, head, s);
  }
  for (const auto& s : consumer_settings()) {
    if (s.range.max == 0) continue;
    check("consumers.c", "[consumers.c]\nendpoint = \"127.0.0.1:9\"\nack = true\n", s);
  }
}

// A consumer_spec field that no row covers (a key read by hand and forgotten in the table) is
// caught here: copying every row's field, and the two that are no keys, gives the whole spec.
BOOST_AUTO_TEST_CASE(every_consumer_field_has_its_row) {
  gatewayd::consumers::consumer_spec full;
  full.name = "c";
  full.address = {"127.0.0.2", 9};
  full.endpoints = {{"127.0.0.2", 9}, {"127.0.0.3", 9}};
  full.balance = gatewayd::consumers::balance_policy::address;
  full.member = "127.0.0.2:9";
  full.queue_capacity = 7;
  full.queue_bytes = 4096;
  full.overflow = gatewayd::consumers::overflow_policy::backpressure;
  full.tls.emplace().digest = "d";
  full.ack = true;
  full.max_unacked_bytes = 12345;
  full.spool_max_bytes = 1 << 20;
  gatewayd::consumers::consumer_spec covered;
  covered.name = full.name;
  covered.member = full.member;
  for (const auto& s : consumer_settings()) {
    BOOST_TEST(!s.same(covered, full), s.key << " is the default already");
    s.copy(covered, full);
  }
  BOOST_TEST((covered == full));
}

// docs/configuration.md's tables of both files say for each key of the table its type with its
// bounds, its default and what a reload does, as the row does; and no key the table lacks.
BOOST_AUTO_TEST_CASE(the_configuration_doc_agrees_with_the_table) {
  const std::string doc = read_file(GATEWAYD_SOURCE_DIR "/docs/configuration.md");
  struct doc_row {
    std::string type, fallback, reload;
  };
  std::map<std::string, doc_row> rows;  // "gateway.threads" -> its cells
  std::string section;
  std::istringstream lines(doc);
  const std::regex heading(R"(^### \[([\w.]+)\])");
  const std::regex row(R"(^\| `(\w+)` \| ([^|]*) \| ([^|]*) \|.*\| ([^|]*) \|$)");
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    // Only the tables of the configuration table's sections: the routes, suppliers and
    // dead_letter tables have no default or reload column.
    if (line.rfind("## ", 0) == 0 || line.rfind("### ", 0) == 0) section.clear();
    if (std::regex_search(line, m, heading) &&
        (!keys_of(m[1].str()).empty() || m[1] == "consumers.NAME"))
      section = m[1];
    if (std::regex_match(line, m, row) && !section.empty())
      rows[section + "." + m[1].str()] = {m[2], m[3], m[4]};
  }
  const auto check = [&](const auto& s, std::size_t& found) {
    BOOST_TEST_CONTEXT("docs/configuration.md, " << s.path()) {
      const auto it = rows.find(s.path());
      BOOST_REQUIRE(it != rows.end());
      ++found;
      BOOST_TEST(it->second.type == s.type_text());
      const std::string d = s.default_text();
      BOOST_TEST((it->second.fallback == d || it->second.fallback.rfind(d + " (", 0) == 0),
                 "default column: " << it->second.fallback << ", the table's: " << d);
      BOOST_TEST((reload_words(it->second.reload) == s.effect),
                 "reload column: " << it->second.reload);
    }
  };
  std::size_t found = 0;
  for (const auto& s : settings())
    check(s, found);
  for (const auto& s : consumer_settings())
    check(s, found);
  BOOST_TEST(found == settings().size() + consumer_settings().size());
  BOOST_TEST(rows.size() == found, "docs list keys the table lacks");
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
