#include "metrics/operator_api.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "suppliers/supplier_session.hpp"

namespace gatewayd::metrics {
namespace {

using json = nlohmann::ordered_json;
using clock = std::chrono::system_clock;

// RFC 3339 in UTC with milliseconds: "2026-11-22T05:07:06.123Z".
std::string timestamp(clock::time_point t) {
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[40];
  const std::size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(text + n, sizeof text - n, ".%03dZ", static_cast<int>(ms % 1000));
  return text;
}

metrics_server::response reply(int status, const json& body) {
  return {status, "application/json", body.dump(2) + '\n'};
}

std::uint64_t value(const std::atomic<std::uint64_t>& a) {
  return a.load(std::memory_order_relaxed);
}

// Who seals and opens a TLS connection's records, or null for plaintext (0: no TLS).
json records_json(std::uint8_t tls_records) {
  if (tls_records == 0) return nullptr;
  return std::string(net::to_string(static_cast<net::tls_records>(tls_records - 1)));
}

// `limit=N` from a query string, or `fallback`.
std::size_t limit_of(std::string_view query, std::size_t fallback) {
  for (std::size_t at = 0; at < query.size();) {
    const std::size_t end = std::min(query.find('&', at), query.size());
    const std::string_view pair = query.substr(at, end - at);
    if (pair.rfind("limit=", 0) == 0) {
      std::size_t n = 0;
      const auto digits = pair.substr(6);
      const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
      if (ec == std::errc() && p == digits.data() + digits.size()) return n;
    }
    at = end + 1;
  }
  return fallback;
}

json consumer_json(const consumers::consumer& c, const consumers::consumer_spec* spec) {
  const auto& st = c.stats();
  json dropped = json::object();
  for (std::size_t r = 0; r < consumers::drop_reason_count; ++r)
    dropped[std::string(to_string(static_cast<consumers::drop_reason>(r)))] = value(st.dropped[r]);
  json error = nullptr;
  if (const auto e = st.last_error.get()) {
    error = {{"message", e->message}, {"at", timestamp(e->at)}};
  }
  return {
      {"name", c.name()},
      // A group member's endpoint (its `member` label); null for a consumer that is not one.
      {"member", c.member().empty() ? json(nullptr) : json(c.member())},
      {"endpoint", spec ? spec->address.to_string() : std::string{}},
      {"state", st.connected.load(std::memory_order_relaxed) ? "connected" : "disconnected"},
      {"tls_records", records_json(st.tls_records.load(std::memory_order_relaxed))},
      {"congested", st.congested.load(std::memory_order_relaxed)},
      {"overflow", std::string(to_string(c.policy()))},
      {"queue",
       {{"depth", value(st.queued_frames)},
        {"bytes", value(st.queued_bytes)},
        {"capacity", c.capacity()}}},
      {"sent", {{"frames", value(st.sent_frames)}, {"bytes", value(st.sent_bytes)}}},
      {"dropped", dropped},
      {"ack", c.acks()},
      // An `ack = true` consumer's frames written and not acknowledged yet (0 for others).
      {"unacked",
       {{"frames", value(st.unacked_frames)},
        {"bytes", value(st.unacked_bytes)},
        {"redelivered", value(st.redelivered_frames)}}},
      {"reconnects", value(st.reconnects)},
      {"handovers",
       {{"count", value(st.handovers)},
        {"given", value(st.handed_over_frames)},
        {"taken", value(st.taken_over_frames)}}},
      {"last_error", error},
  };
}

// One supplier connection as /connz lists it, copied out of the session.
struct supplier_row {
  std::string peer;
  clock::time_point since;
  std::uint64_t frames, bytes;
  bool paused;
  std::optional<clock::time_point> paused_since;  // behind a full consumer
  bool awaiting_confirms;
  std::optional<clock::time_point> waiting_since;  // paused or awaiting confirms
  std::uint8_t tls_records;
  std::uint64_t confirmed, pending;  // CONFIRM frames
};

json supplier_json(const supplier_row& r, clock::time_point now) {
  return {{"peer", r.peer},
          {"since", timestamp(r.since)},
          {"frames", r.frames},
          {"bytes", r.bytes},
          {"paused", r.paused},
          {"paused_since", r.paused_since ? json(timestamp(*r.paused_since)) : json(nullptr)},
          {"awaiting_confirms", r.awaiting_confirms},
          {"waiting_since", r.waiting_since ? json(timestamp(*r.waiting_since)) : json(nullptr)},
          {"waiting_ms",
           r.waiting_since
               ? json(std::chrono::duration_cast<std::chrono::milliseconds>(now - *r.waiting_since)
                          .count())
               : json(nullptr)},
          {"tls_records", records_json(r.tls_records)},
          {"confirmed", r.confirmed},
          {"pending", r.pending}};
}

}  // namespace

void operator_api::serve_on(metrics_server& server) const {
  server.handle("/healthz", [this](std::string_view) { return healthz(); });
  server.handle("/readyz", [this](std::string_view) { return readyz(); });
  server.handle("/connz", [this](std::string_view q) { return connz(q); });
  server.handle("/routez", [this](std::string_view) { return routez(); });
}

metrics_server::response operator_api::healthz() const {
  const auto up = std::chrono::duration<double>(clock::now() - s_.state.started).count();
  return reply(200, {{"status", "ok"},
                     {"version", s_.version},
                     {"pid", ::getpid()},
                     {"started", timestamp(s_.state.started)},
                     {"uptime_seconds", up}});
}

// Ready = a balancer may send suppliers here: the listener accepts, a table is loaded, and no
// stop has begun (a lame duck answers 503 while it still accepts, so the balancer moves on).
metrics_server::response operator_api::readyz() const {
  const bool listening = s_.state.listening.load();
  const bool draining = s_.state.draining.load();
  const bool loaded = s_.routes.load() != nullptr;
  const bool ready = listening && loaded && !draining;
  return reply(ready ? 200 : 503, {{"ready", ready},
                                   {"listening", listening},
                                   {"table_loaded", loaded},
                                   {"draining", draining}});
}

metrics_server::response operator_api::connz(std::string_view query) const {
  std::vector<supplier_row> rows;
  // The pause began on the steady clock (what the connection cap compares); shown on the wall
  // clock, as long ago as it is now. A session may begin to wait while the list is walked, after
  // `steady_now`: it shows as beginning now, never after the answer's `now`.
  const auto now = clock::now();
  const auto steady_now = std::chrono::steady_clock::now();
  const auto wall = [&](std::optional<std::chrono::steady_clock::time_point> at) {
    std::optional<clock::time_point> out;
    if (at) {
      out =
          now - std::chrono::duration_cast<clock::duration>(steady_now - std::min(*at, steady_now));
    }
    return out;
  };
  s_.sessions.for_each([&](const suppliers::supplier_session& s) {
    rows.push_back({s.peer(), s.stats().since, value(s.stats().frames), value(s.stats().bytes),
                    s.paused(), wall(s.paused_by_consumer_since()), s.awaiting_confirms(),
                    wall(s.waiting_since()), s.stats().tls_records.load(std::memory_order_relaxed),
                    value(s.stats().confirmed), value(s.stats().pending)});
  });
  // Oldest first: the list is stable between two looks, and the limit keeps the longest-lived.
  std::sort(rows.begin(), rows.end(),
            [](const supplier_row& a, const supplier_row& b) { return a.since < b.since; });
  const std::size_t limit = limit_of(query, default_supplier_limit);
  const std::size_t listed = limit == 0 ? rows.size() : std::min(limit, rows.size());
  json connections = json::array();
  for (std::size_t i = 0; i < listed; ++i) {
    connections.push_back(supplier_json(rows[i], now));
  }
  json consumers_out = json::array();
  if (const auto snap = s_.routes.load()) {
    for (std::size_t i = 0; i < snap->consumers.size(); ++i) {
      consumers_out.push_back(
          consumer_json(*snap->consumers[i], i < snap->specs.size() ? &snap->specs[i] : nullptr));
    }
  }
  return reply(200, {{"now", timestamp(now)},
                     {"suppliers",
                      {{"total", rows.size()}, {"listed", listed}, {"connections", connections}}},
                     {"consumers", consumers_out}});
}

metrics_server::response operator_api::routez() const {
  const auto snap = s_.routes.load();
  if (!snap || !snap->table) return reply(503, {{"error", "no routing table loaded"}});
  const auto& table = *snap->table;
  json routes = json::array();
  for (std::size_t r = 0; r < table.rules().routes.size(); ++r) {
    const auto& route = table.rules().routes[r];
    routes.push_back({{"match", route.match},
                      {"to", route.to},
                      {"hits", value(snap->pattern_hits[table.route_pattern(r)])}});
  }
  json dead_letter = nullptr;
  if (table.rules().dead_letter) dead_letter = *table.rules().dead_letter;
  return reply(200, {{"version", snap->version},
                     {"sha256", snap->sha256},
                     {"loaded_at", timestamp(snap->loaded_at)},
                     {"routes", routes},
                     {"dead_letter", dead_letter},
                     {"unroutable", value(s_.suppliers.unroutable)}});
}

}  // namespace gatewayd::metrics
