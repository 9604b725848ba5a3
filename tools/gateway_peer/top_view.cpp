#include "tools/gateway_peer/top_view.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace gatewayd::tools {
namespace {

using json = nlohmann::json;

std::string printf_string(const char* format, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, format, args...);
  return buf;
}

std::string rate_text(double r) {
  if (r < 0) return "-";
  return r < 10 ? printf_string("%.1f", r) : printf_string("%.0f", r);
}

std::string bytes_text(double b) {
  if (b < 1024) return printf_string("%.0f", b);
  if (b < 1024.0 * 1024) return printf_string("%.1fK", b / 1024);
  if (b < 1024.0 * 1024 * 1024) return printf_string("%.1fM", b / (1024.0 * 1024));
  return printf_string("%.1fG", b / (1024.0 * 1024 * 1024));
}

std::string age_text(double s) {
  const auto t = static_cast<long long>(s);
  if (t < 60) return printf_string("%llds", t);
  if (t < 3600) return printf_string("%lldm%02llds", t / 60, t % 60);
  if (t < 86400) return printf_string("%lldh%02lldm", t / 3600, t % 3600 / 60);
  return printf_string("%lldd%02lldh", t / 86400, t % 86400 / 3600);
}

// RFC 3339 in UTC as the operator endpoints write it ("2026-11-22T05:07:06.123Z"), in seconds.
double rfc3339_seconds(const std::string& t) {
  std::tm tm{};
  int ms = 0;
  if (std::sscanf(t.c_str(), "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) < 6)
    return 0;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<double>(timegm(&tm)) + ms / 1000.0;
}

std::uint64_t u64(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
}

double fill(const consumer_row& c) {
  return c.capacity ? static_cast<double>(c.depth) / static_cast<double>(c.capacity) : 0;
}

const char* key_name(sort_key k) {
  switch (k) {
    case sort_key::name:
      return "name";
    case sort_key::fill:
      return "fill";
    case sort_key::rate:
      return "rate";
    case sort_key::drops:
      return "drops";
    case sort_key::unacked:
      return "unacked";
  }
  return "?";
}

}  // namespace

exposition exposition::parse(std::string_view text) {
  exposition e;
  while (!text.empty()) {
    const auto eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
    if (line.empty() || line[0] == '#') continue;
    // name{labels} value [timestamp]: the label text may hold spaces inside quotes.
    std::size_t name_end = line.find_first_of("{ ");
    if (name_end == std::string_view::npos) continue;
    sample s{std::string(line.substr(0, name_end)), {}, 0};
    std::size_t value_at = name_end;
    if (line[name_end] == '{') {
      bool quoted = false;
      std::size_t i = name_end + 1;
      for (; i < line.size(); ++i) {
        if (line[i] == '\\') {
          ++i;
        } else if (line[i] == '"') {
          quoted = !quoted;
        } else if (line[i] == '}' && !quoted) {
          break;
        }
      }
      if (i >= line.size()) continue;
      s.labels = std::string(line.substr(name_end + 1, i - name_end - 1));
      value_at = i + 1;
    }
    std::string value(line.substr(value_at));
    value.erase(0, value.find_first_not_of(' '));
    value = value.substr(0, value.find(' '));
    try {
      s.value = std::stod(value);  // also +Inf, NaN
    } catch (const std::exception&) {
      continue;
    }
    e.samples_.push_back(std::move(s));
  }
  return e;
}

double exposition::sum(std::string_view name,
                       std::initializer_list<std::string_view> filters) const {
  double total = 0;
  for (const auto& s : samples_) {
    if (s.name != name) continue;
    if (std::all_of(filters.begin(), filters.end(),
                    [&](std::string_view f) { return s.labels.find(f) != std::string::npos; }))
      total += s.value;
  }
  return total;
}

std::vector<std::string> exposition::label_values(std::string_view name,
                                                  std::string_view label) const {
  std::vector<std::string> out;
  const std::string key = std::string(label) + "=\"";
  for (const auto& s : samples_) {
    if (s.name != name) continue;
    // The label at the start of the text or after a comma, so "reason" never matches "xreason".
    for (std::size_t at = s.labels.find(key); at != std::string::npos;
         at = s.labels.find(key, at + 1)) {
      if (at != 0 && s.labels[at - 1] != ',') continue;
      const std::size_t from = at + key.size();
      out.push_back(s.labels.substr(from, s.labels.find('"', from) - from));
      break;
    }
  }
  return out;
}

std::string exposition::label(std::string_view name, std::string_view label) const {
  auto v = label_values(name, label);
  return v.empty() ? std::string{} : v.front();
}

void read_bodies(gateway_reading& r, std::string_view metrics, std::string_view connz,
                 std::string_view routez) {
  r.metrics = exposition::parse(metrics);
  const json c = json::parse(connz);
  const json& sup = c.at("suppliers");
  r.suppliers_total = u64(sup, "total");
  const double now = rfc3339_seconds(c.value("now", std::string{}));
  for (const auto& s : sup.at("connections")) {
    supplier_row row;
    row.peer = s.value("peer", std::string{});
    row.frames = u64(s, "frames");
    row.pending = u64(s, "pending");
    row.confirmed = u64(s, "confirmed");
    row.tls = s.contains("tls_records") && s["tls_records"].is_string()
                  ? s["tls_records"].get<std::string>()
                  : std::string("-");
    row.age_seconds = std::max(0.0, now - rfc3339_seconds(s.value("since", std::string{})));
    // Paused first: a paused session is not read, whatever it is owed. A gateway that says
    // why a session waits (awaiting_confirms) is believed; else CONFIRM frames owed say it.
    const bool awaiting = s.contains("awaiting_confirms") && s["awaiting_confirms"].is_boolean()
                              ? s["awaiting_confirms"].get<bool>()
                              : row.pending > 0;
    row.state = s.value("paused", false) ? "paused" : awaiting ? "confirming" : "reading";
    r.suppliers.push_back(std::move(row));
  }
  for (const auto& k : c.at("consumers")) {
    consumer_row row;
    row.name = k.value("name", std::string{});
    row.overflow = k.value("overflow", std::string{});
    const bool connected = k.value("state", std::string{}) == "connected";
    row.state = !connected                    ? "disconnected"
                : k.value("congested", false) ? "congested"
                                              : "connected";
    const json& q = k.at("queue");
    row.depth = u64(q, "depth");
    row.capacity = u64(q, "capacity");
    row.queued_bytes = u64(q, "bytes");
    row.sent = u64(k.at("sent"), "frames");
    row.sent_bytes = u64(k.at("sent"), "bytes");
    for (const auto& [reason, n] : k.at("dropped").items()) {
      if (n.is_number_unsigned()) row.dropped += n.get<std::uint64_t>();
    }
    row.ack = k.value("ack", false);
    const json& u = k.at("unacked");
    row.unacked = u64(u, "frames");
    row.unacked_bytes = u64(u, "bytes");
    row.redelivered = u64(u, "redelivered");
    row.reconnects = u64(k, "reconnects");
    r.consumers.push_back(std::move(row));
  }
  const json t = json::parse(routez);
  r.table_version = u64(t, "version");
  r.sha256 = t.value("sha256", std::string{});
  r.routes = t.contains("routes") && t["routes"].is_array() ? t["routes"].size() : 0;
}

void top_view::update(gateway_reading reading) {
  if (!reading.error.empty()) {
    error_ = std::move(reading.error);
    return;
  }
  error_.clear();
  if (have_now_) {
    last_ = std::move(now_);
    have_last_ = true;
  }
  now_ = std::move(reading);
  have_now_ = true;
  if (!have_last_) return;
  dt_ = std::chrono::duration<double>(now_.at - last_.at).count();
  if (dt_ <= 0) return;
  const auto per_second = [&](std::uint64_t now, std::uint64_t before) {
    return now >= before ? static_cast<double>(now - before) / dt_ : -1.0;  // -1: a restart
  };
  for (auto& c : now_.consumers) {
    const auto was = std::find_if(last_.consumers.begin(), last_.consumers.end(),
                                  [&](const consumer_row& o) { return o.name == c.name; });
    if (was == last_.consumers.end()) continue;
    c.sent_rate = per_second(c.sent, was->sent);
    c.bytes_rate = per_second(c.sent_bytes, was->sent_bytes);
    c.drop_rate = per_second(c.dropped, was->dropped);
  }
  for (auto& s : now_.suppliers) {
    // A peer address and port names one connection while it is open.
    const auto was = std::find_if(last_.suppliers.begin(), last_.suppliers.end(),
                                  [&](const supplier_row& o) { return o.peer == s.peer; });
    if (was != last_.suppliers.end()) s.rate = per_second(s.frames, was->frames);
  }
}

bool top_view::handle_key(char key) {
  switch (key) {
    case 'q':
    case 'Q':
    case 3:
      quit_ = true;
      return true;  // 3: Ctrl-C read as a byte
    case 'n':
      key_ = sort_key::name;
      return true;
    case 'f':
      key_ = sort_key::fill;
      return true;
    case 't':
      key_ = sort_key::rate;
      return true;
    case 'd':
      key_ = sort_key::drops;
      return true;
    case 'u':
      key_ = sort_key::unacked;
      return true;
    case 'r':
      reverse_ = !reverse_;
      return true;
    case 's':
      key_ = static_cast<sort_key>((static_cast<int>(key_) + 1) % 5);
      return true;
    default:
      return false;
  }
}

std::vector<std::string> top_view::render(std::size_t width, std::size_t height,
                                          std::string_view target) const {
  std::vector<std::string> lines;
  const auto& m = now_.metrics;
  const auto global_rate = [&](std::string_view name,
                               std::initializer_list<std::string_view> filters = {}) {
    if (!have_last_ || dt_ <= 0) return -1.0;
    const double d = m.sum(name, filters) - last_.metrics.sum(name, filters);
    return d >= 0 ? d / dt_ : -1.0;
  };

  // The gateway, its table, how long it has run.
  std::string head = "gatewayd";
  if (have_now_) {
    const std::string version = m.label("gatewayd_build_info", "version");
    if (!version.empty()) head += " " + version;
  }
  head += " at " + std::string(target);
  if (have_now_) {
    head += printf_string("  table v%llu, %llu route%s, sha256 %.12s",
                          static_cast<unsigned long long>(now_.table_version),
                          static_cast<unsigned long long>(now_.routes), now_.routes == 1 ? "" : "s",
                          now_.sha256.c_str());
    const double started = m.sum("process_start_time_seconds");
    if (started > 0) {
      head += "  up " + age_text(static_cast<double>(std::time(nullptr)) - started);
    }
  }
  lines.push_back(head);
  if (!error_.empty()) {
    lines.push_back("! cannot read the gateway: " + error_ +
                    (have_now_ ? " (the figures below are the last it gave)" : ""));
  }
  if (!have_now_) {
    if (error_.empty()) lines.push_back("reading the gateway...");
  } else {
    lines.push_back(printf_string(
        "in %s frames/s %s B/s  unroutable %s/s  sent %s frames/s",
        rate_text(global_rate("gatewayd_supplier_messages_received_total")).c_str(),
        bytes_text(std::max(0.0, global_rate("gatewayd_supplier_bytes_received_total"))).c_str(),
        rate_text(global_rate("gatewayd_messages_unroutable_total")).c_str(),
        rate_text(global_rate("gatewayd_consumer_messages_sent_total")).c_str()));
    std::string rejected;
    for (const auto& reason : m.label_values("gatewayd_supplier_rejected_frames_total", "reason")) {
      rejected += printf_string(
          " %s %.0f", reason.c_str(),
          m.sum("gatewayd_supplier_rejected_frames_total", {"reason=\"" + reason + "\""}));
    }
    lines.push_back(
        printf_string("confirms %.0f (%s/s)  unconfirmed %.0f  rejected%s",
                      m.sum("gatewayd_supplier_confirmed_frames_total"),
                      rate_text(global_rate("gatewayd_supplier_confirmed_frames_total")).c_str(),
                      m.sum("gatewayd_supplier_unconfirmed_frames"), rejected.c_str()));
    std::uint64_t reading = 0, paused = 0, confirming = 0;
    for (const auto& s : now_.suppliers) {
      (s.state == "paused" ? paused : s.state == "confirming" ? confirming : reading) += 1;
    }
    const std::string listed =
        now_.suppliers.size() < now_.suppliers_total
            ? printf_string(" (states of the %zu oldest)", now_.suppliers.size())
            : std::string{};
    lines.push_back(printf_string(
        "suppliers %llu%s: reading %llu  paused %llu  confirming %llu  reclaimed %.0f  "
        "pauses %s/s",
        static_cast<unsigned long long>(now_.suppliers_total), listed.c_str(),
        static_cast<unsigned long long>(reading), static_cast<unsigned long long>(paused),
        static_cast<unsigned long long>(confirming),
        m.sum("gatewayd_supplier_connections_closed_total", {"reason=\"reclaimed\""}),
        rate_text(global_rate("gatewayd_supplier_backpressure_pauses_total")).c_str()));
    lines.emplace_back();

    // Consumers, in the order the operator asked for.
    std::vector<const consumer_row*> rows;
    std::size_t name_width = 8;
    for (const auto& c : now_.consumers) {
      rows.push_back(&c);
      name_width = std::max(name_width, std::min<std::size_t>(c.name.size(), 32));
    }
    std::stable_sort(rows.begin(), rows.end(), [&](const consumer_row* a, const consumer_row* b) {
      const auto by = [&](auto x, auto y) {
        return x != y ? (x > y) != reverse_ : a->name < b->name;
      };
      switch (key_) {
        case sort_key::name:
          return (a->name < b->name) != reverse_;
        case sort_key::fill:
          return by(fill(*a), fill(*b));
        case sort_key::rate:
          return by(a->sent_rate, b->sent_rate);
        case sort_key::drops:
          return by(a->dropped, b->dropped);
        case sort_key::unacked:
          return by(a->unacked_bytes, b->unacked_bytes);
      }
      return false;
    });
    const int nw = static_cast<int>(name_width);
    lines.push_back(printf_string("%-*s %-12s %-12s %13s %5s %10s %8s %8s %9s %7s %8s %9s %7s %6s",
                                  nw, "CONSUMER", "STATE", "OVERFLOW", "QUEUE", "FILL", "SENT",
                                  "SENT/s", "B/s", "DROPS", "DROP/s", "UNACKED", "UNACKED_B",
                                  "REDELIV", "RECONN"));
    for (const auto* c : rows) {
      const auto ack_field = [&](std::uint64_t v, bool bytes) {
        if (!c->ack) return std::string("-");
        return bytes ? bytes_text(static_cast<double>(v)) : std::to_string(v);
      };
      lines.push_back(printf_string(
          "%-*.*s %-12s %-12s %13s %4.0f%% %10llu %8s %8s %9llu %7s %8s %9s %7s %6llu", nw, nw,
          c->name.c_str(), c->state.c_str(), c->overflow.c_str(),
          (std::to_string(c->depth) + "/" + std::to_string(c->capacity)).c_str(), 100 * fill(*c),
          static_cast<unsigned long long>(c->sent), rate_text(c->sent_rate).c_str(),
          c->bytes_rate < 0 ? "-" : bytes_text(c->bytes_rate).c_str(),
          static_cast<unsigned long long>(c->dropped), rate_text(c->drop_rate).c_str(),
          ack_field(c->unacked, false).c_str(), ack_field(c->unacked_bytes, true).c_str(),
          ack_field(c->redelivered, false).c_str(),
          static_cast<unsigned long long>(c->reconnects)));
    }
    lines.emplace_back();

    // Suppliers as /connz lists them (oldest first), as many as fit above the key line.
    std::size_t peer_width = 8;
    for (const auto& s : now_.suppliers)
      peer_width = std::max(peer_width, s.peer.size());
    const int pw = static_cast<int>(std::min<std::size_t>(peer_width, 48));
    lines.push_back(printf_string("%-*s %-10s %8s %10s %8s %8s %10s %-10s", pw, "SUPPLIER", "STATE",
                                  "AGE", "FRAMES", "FRAMES/s", "OWED", "CONFIRMED", "TLS"));
    const std::size_t room = height == 0                 ? now_.suppliers.size()
                             : height > lines.size() + 1 ? height - lines.size() - 1
                                                         : 0;
    for (std::size_t i = 0; i < now_.suppliers.size(); ++i) {
      if (i + 1 == room && now_.suppliers.size() > room) {
        lines.push_back(printf_string("... %zu more", now_.suppliers.size() - i));
        break;
      }
      if (i >= room) break;
      const auto& s = now_.suppliers[i];
      lines.push_back(printf_string(
          "%-*.*s %-10s %8s %10llu %8s %8llu %10llu %-10s", pw, pw, s.peer.c_str(), s.state.c_str(),
          age_text(s.age_seconds).c_str(), static_cast<unsigned long long>(s.frames),
          rate_text(s.rate).c_str(), static_cast<unsigned long long>(s.pending),
          static_cast<unsigned long long>(s.confirmed), s.tls.c_str()));
    }
  }

  // Fit the screen: the key line always shows, at the bottom (height 0: no screen to fit).
  if (height > 0) {
    lines.resize(std::min(lines.size(), height - 1));
    lines.resize(height - 1);
    lines.push_back(
        printf_string("q quit  s next sort  r reverse  n name  f fill  t rate  "
                      "d drops  u unacked   sorted by %s%s",
                      key_name(key_), reverse_ ? " (reversed)" : ""));
  }
  for (auto& l : lines) {
    if (l.size() > width) l.resize(width);
    l.erase(l.find_last_not_of(' ') + 1);  // the padding of a last column
  }
  return lines;
}

}  // namespace gatewayd::tools
