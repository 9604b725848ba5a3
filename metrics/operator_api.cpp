#include "metrics/operator_api.hpp"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "suppliers/supplier_session.hpp"

namespace gatewayd::metrics {
namespace {

using json = nlohmann::ordered_json;
using clock = std::chrono::system_clock;

// A /connz page at least this long gives its memory back once answered (malloc_trim): a walk of
// the arenas, a millisecond or so, only when an operator lists this many.
constexpr std::size_t trim_after_rows = 200;

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

// A counter read for JSON: exact, where a Prometheus sample is a double (family_builder value()).
std::uint64_t exact(const std::atomic<std::uint64_t>& a) {
  return a.load(std::memory_order_relaxed);
}

// Who seals and opens a TLS connection's records, or null for plaintext (0: no TLS).
json records_json(std::uint8_t tls_records) {
  if (tls_records == 0) return nullptr;
  return std::string(net::to_string(static_cast<net::tls_records>(tls_records - 1)));
}

// The number N of `key=N` in a query string, or `fallback` (absent, or not a number).
std::uint64_t number_of(std::string_view query, std::string_view key, std::uint64_t fallback) {
  for (std::size_t at = 0; at < query.size();) {
    const std::size_t end = std::min(query.find('&', at), query.size());
    const std::string_view pair = query.substr(at, end - at);
    if (pair.size() > key.size() && pair.substr(0, key.size()) == key && pair[key.size()] == '=') {
      std::uint64_t n = 0;
      const auto digits = pair.substr(key.size() + 1);
      const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
      if (ec == std::errc() && p == digits.data() + digits.size()) return n;
    }
    at = end + 1;
  }
  return fallback;
}

// A spooled consumer's spool (null without one): what it holds, since when, and how its files
// have fared; the same facts as its gatewayd_consumer_spool_* series.
json spool_json(const consumers::consumer& c, const consumers::consumer_spec* spec,
                clock::time_point now) {
  const consumers::spool* s = c.spool_files();
  if (!s) return nullptr;
  const auto& st = s->stats();
  const std::uint64_t frames = exact(st.frames);
  const std::int64_t oldest_ms = st.oldest_ms.load(std::memory_order_relaxed);
  json oldest_at = nullptr;
  json oldest_age_ms = nullptr;
  if (frames && oldest_ms) {
    const clock::time_point at{std::chrono::milliseconds(oldest_ms)};
    oldest_at = timestamp(at);
    oldest_age_ms = std::max<std::int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(now - at).count());
  }
  return {{"dir", s->dir().string()},
          {"frames", frames},
          {"bytes", exact(st.bytes)},
          {"max_bytes", spec ? spec->spool_max_bytes : 0},
          {"full", st.full.load(std::memory_order_relaxed)},
          {"oldest_at", oldest_at},
          {"oldest_age_ms", oldest_age_ms},
          {"written", {{"frames", exact(st.written_frames)}, {"bytes", exact(st.written_bytes)}}},
          {"read_frames", exact(st.read_frames)},
          {"syncs", exact(st.syncs)},
          {"sync_seconds", static_cast<double>(exact(st.sync_ns)) / 1e9},
          {"torn_records", exact(st.torn_records_cut)},
          {"refused_frames", exact(st.refused_frames)},
          {"no_space", exact(st.no_space)},
          {"io_errors", exact(st.io_errors)}};
}

json consumer_json(const consumers::consumer& c, const consumers::consumer_spec* spec,
                   clock::time_point now) {
  const auto& st = c.stats();
  json dropped = json::object();
  for (std::size_t r = 0; r < consumers::drop_reason_count; ++r)
    dropped[std::string(to_string(static_cast<consumers::drop_reason>(r)))] = exact(st.dropped[r]);
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
       {{"depth", exact(st.queued_frames)},
        {"bytes", exact(st.queued_bytes)},
        {"capacity", c.capacity()}}},
      {"sent", {{"frames", exact(st.sent_frames)}, {"bytes", exact(st.sent_bytes)}}},
      {"dropped", dropped},
      {"ack", c.acks()},
      // An `ack = true` consumer's frames written and not acknowledged yet (0 for others).
      {"unacked",
       {{"frames", exact(st.unacked_frames)},
        {"bytes", exact(st.unacked_bytes)},
        {"redelivered", exact(st.redelivered_frames)}}},
      {"reconnects", exact(st.reconnects)},
      {"handovers",
       {{"count", exact(st.handovers)},
        {"given", exact(st.handed_over_frames)},
        {"taken", exact(st.taken_over_frames)}}},
      {"last_error", error},
      {"spool", spool_json(c, spec, now)},
  };
}

// One supplier connection as /connz lists it, copied out of the session.
struct supplier_row {
  std::uint64_t id;  // the registry's: the cursor for ?after=
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
  return {{"id", r.id},
          {"peer", r.peer},
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

// The session's row, its times on the wall clock of `now`: a pause began on the steady clock
// (what the connection cap compares) and is shown as long ago as it is now. A session may begin
// to wait while the list is walked, after `steady_now`: it shows as beginning now, never after
// the answer's `now`.
supplier_row row_of(std::uint64_t id, const suppliers::supplier_session& s, clock::time_point now,
                    std::chrono::steady_clock::time_point steady_now) {
  const auto wall = [&](std::optional<std::chrono::steady_clock::time_point> at) {
    std::optional<clock::time_point> out;
    if (at) {
      out =
          now - std::chrono::duration_cast<clock::duration>(steady_now - std::min(*at, steady_now));
    }
    return out;
  };
  const auto& st = s.stats();
  return {id,
          s.peer(),
          st.since,
          exact(st.frames),
          exact(st.bytes),
          s.paused(),
          wall(s.paused_by_consumer_since()),
          s.awaiting_confirms(),
          wall(s.waiting_since()),
          st.tls_records.load(std::memory_order_relaxed),
          exact(st.confirmed),
          exact(st.pending)};
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

// One page of the supplier connections, oldest first (the registry's ids): the `limit` after the
// cursor are chosen in one walk that keeps only them. Before, every request copied and sorted
// every session and listed all of them at limit=0 (1.45 MB for 4,000, issue 42): now what a
// request builds is bounded by max_supplier_limit, whatever the number of connections.
metrics_server::response operator_api::connz(std::string_view query) const {
  const auto now = clock::now();
  const auto steady_now = std::chrono::steady_clock::now();
  std::uint64_t limit = number_of(query, "limit", default_supplier_limit);
  if (limit == 0 || limit > max_supplier_limit) limit = max_supplier_limit;
  std::vector<suppliers::session_registry::listed> page;
  const std::size_t above =
      s_.sessions.oldest_after(number_of(query, "after", 0), static_cast<std::size_t>(limit), page);
  json connections = json::array();
  for (const auto& [id, session] : page) {
    connections.push_back(supplier_json(row_of(id, *session, now, steady_now), now));
  }
  // More after this page: the last id listed is where the next one starts.
  const json next = above > page.size() && !page.empty() ? json(page.back().id) : json(nullptr);
  json consumers_out = json::array();
  if (const auto snap = s_.routes.load()) {
    for (std::size_t i = 0; i < snap->consumers.size(); ++i) {
      consumers_out.push_back(consumer_json(
          *snap->consumers[i], i < snap->specs.size() ? &snap->specs[i] : nullptr, now));
    }
  }
  auto answer = reply(200, {{"now", timestamp(now)},
                            {"suppliers",
                             {{"total", s_.sessions.size()},
                              {"listed", page.size()},
                              {"next", next},
                              {"connections", std::move(connections)}}},
                            {"consumers", std::move(consumers_out)}});
  // A large page's tree (some 3 KB a row, freed by now) stays in this civetweb thread's malloc
  // arena, and the 128 threads share up to 8 per core: given back to the system here, so the
  // memory an operator's paging takes does not stay (measured in docs/operations.md).
  if (page.size() >= trim_after_rows) ::malloc_trim(0);
  return answer;
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
                      {"hits", exact(snap->pattern_hits[table.route_pattern(r)])}});
  }
  json dead_letter = nullptr;
  if (table.rules().dead_letter) dead_letter = *table.rules().dead_letter;
  return reply(200, {{"version", snap->version},
                     {"sha256", snap->sha256},
                     {"loaded_at", timestamp(snap->loaded_at)},
                     {"routes", routes},
                     {"dead_letter", dead_letter},
                     {"unroutable", exact(s_.suppliers.unroutable)}});
}

}  // namespace gatewayd::metrics
