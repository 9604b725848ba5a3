#include "metrics/gateway_collector.hpp"

#include <iterator>

#include "metrics/family_builder.hpp"
#include "suppliers/frame_router.hpp"

namespace gatewayd::metrics {

using prometheus::MetricType;

namespace {

// Open supplier sessions by state (supplier_session's states; a closed one is counted in none).
prometheus::MetricFamily sessions_by_state(const suppliers::supplier_stats& st) {
  auto f = family("gatewayd_supplier_sessions",
                  "Open supplier connections by state: handshaking, reading, paused (by a "
                  "backpressure consumer), held (by the gateway's stop), departing, confirming "
                  "(waiting for confirms to make room).",
                  MetricType::Gauge);
  for (std::size_t i = 0; i < suppliers::session_state_count; ++i) {
    const auto state = static_cast<suppliers::session_state>(i);
    if (state == suppliers::session_state::closed) continue;
    add_sample(f, static_cast<double>(st.sessions[i].load(std::memory_order_relaxed)),
               {{"state", std::string(suppliers::to_string(state))}});
  }
  return f;
}

// Frames the suppliers' publish permissions dropped, by the rule they fell under.
prometheus::MetricFamily dropped_by_supplier(const suppliers::supplier_stats& st) {
  auto not_permitted = family(
      "gatewayd_supplier_dropped_messages_total",
      "Frames from suppliers that were dropped, by supplier (the routes.toml [suppliers.NAME] "
      "rule they fell under, or default) and reason: not_permitted (the rule does not let them "
      "publish to the address).",
      MetricType::Counter);
  for (auto& [supplier, count] : st.not_permitted->values()) {
    add_sample(not_permitted, static_cast<double>(count),
               {{"supplier", std::move(supplier)}, {"reason", "not_permitted"}});
  }
  return not_permitted;
}

}  // namespace

std::vector<prometheus::MetricFamily> gateway_collector::Collect() const {
  std::vector<prometheus::MetricFamily> out;
  collect_consumers(out);
  collect_suppliers(out);
  collect_confirms(out);
  collect_tls(out);
  collect_runtime(out);
  collect_config(out);
  return out;
}

void gateway_collector::collect_suppliers(std::vector<prometheus::MetricFamily>& out) const {
  const auto& st = s_.suppliers;
  out.push_back(family_of_one("gatewayd_supplier_connections", "Supplier connections open now.",
                              MetricType::Gauge,
                              static_cast<double>(st.connections.load(std::memory_order_relaxed))));
  out.push_back(sessions_by_state(st));
  out.push_back(family_of_one("gatewayd_supplier_handshaking_connections",
                              "Supplier connections still in their TLS handshake or PROXY header.",
                              MetricType::Gauge,
                              static_cast<double>(st.handshaking.load(std::memory_order_relaxed))));
  out.push_back(family_of_one("gatewayd_supplier_connections_accepted_total",
                              "Supplier connections accepted.", MetricType::Counter,
                              value(st.accepted)));
  auto closed =
      family("gatewayd_supplier_connections_closed_total",
             "Supplier connections the gateway refused or closed, by reason.", MetricType::Counter);
  add_by_reason<suppliers::close_reason>(closed, st.closed);
  out.push_back(std::move(closed));
  auto partial_frames = family(
      "gatewayd_supplier_partial_frames_discarded_total",
      "Frames a supplier connection had received only in part when it ended, thrown away, by "
      "why it ended.",
      MetricType::Counter);
  add_by_reason<suppliers::partial_discard>(partial_frames, st.partial_frames_discarded);
  out.push_back(std::move(partial_frames));
  auto partial_bytes =
      family("gatewayd_supplier_partial_frame_bytes_discarded_total",
             "Bytes received of those frames: with the whole frames' bytes they make up "
             "gatewayd_supplier_bytes_received_total.",
             MetricType::Counter);
  add_by_reason<suppliers::partial_discard>(partial_bytes, st.partial_bytes_discarded);
  out.push_back(std::move(partial_bytes));
  out.push_back(family_of_one("gatewayd_supplier_messages_received_total",
                              "Whole frames received from suppliers.", MetricType::Counter,
                              value(st.frames_received)));
  out.push_back(family_of_one("gatewayd_supplier_bytes_received_total",
                              "Bytes received from suppliers.", MetricType::Counter,
                              value(st.bytes_received)));
  auto errors = family("gatewayd_supplier_protocol_errors_total",
                       "Supplier connections closed for a GWP/1 protocol error, by reason.",
                       MetricType::Counter);
  add_by_reason<protocol::frame_error>(errors, st.protocol_errors, {}, 1);  // 0 is "none"
  out.push_back(std::move(errors));
  out.push_back(dropped_by_supplier(st));
  out.push_back(family_of_one(
      "gatewayd_supplier_backpressure_pauses_total",
      "Times a supplier stopped being read: a backpressure consumer was full, or a consumer "
      "that keeps up was more than a few batches behind (the gateway itself lagging).",
      MetricType::Counter, value(st.backpressure_pauses)));
  out.push_back(family_of_one("gatewayd_messages_unroutable_total",
                              "Frames whose address no route matched (sent to the dead-letter "
                              "consumer if one is configured).",
                              MetricType::Counter, value(st.unroutable)));
}

void gateway_collector::collect_confirms(std::vector<prometheus::MetricFamily>& out) const {
  const auto& st = s_.suppliers;
  out.push_back(family_of_one(
      "gatewayd_supplier_confirmed_frames_total",
      "CONFIRM frames covered by a cumulative confirm sent back to their supplier (rejected ones "
      "included).",
      MetricType::Counter, value(st.confirmed_frames)));
  auto rejected =
      family("gatewayd_supplier_rejected_frames_total",
             "CONFIRM frames rejected back to their supplier, by reason.", MetricType::Counter);
  for (std::size_t r = 0; r < protocol::reject_reason_count; ++r) {
    add_sample(rejected, value(st.rejected_frames[r]),
               {{"reason", std::string(to_string(static_cast<protocol::reject_reason>(r + 1)))}});
  }
  out.push_back(std::move(rejected));
  out.push_back(
      family_of_one("gatewayd_supplier_unconfirmed_frames",
                    "CONFIRM frames numbered on open supplier connections and not yet confirmed.",
                    MetricType::Gauge,
                    static_cast<double>(st.unconfirmed_frames.load(std::memory_order_relaxed))));
  out.push_back(family_of_one(
      "gatewayd_confirm_ledger_bytes",
      "Bytes all confirm ledgers hold: open supplier connections' and, for frames still owed, "
      "closed ones'.",
      MetricType::Gauge, static_cast<double>(st.confirm_ledger.used())));
  out.push_back(family_of_one(
      "gatewayd_confirm_ledger_limit_bytes",
      "max_confirm_ledger_bytes (0: no bound), shared out among the consumers: one that owes "
      "its share (gatewayd_consumer_confirms_owed_limit) is full, and its own policy applies.",
      MetricType::Gauge, static_cast<double>(st.confirm_ledger.limit())));
}

void gateway_collector::collect_tls(std::vector<prometheus::MetricFamily>& out) const {
  std::array<double, net::tls_records_count> consumer_connections{};
  std::array<double, net::tls_error_count> consumer_errors{};
  for_each_consumer([&](const consumers::consumer& c) {
    if (const auto r = c.stats().tls_records.load(std::memory_order_relaxed))
      consumer_connections[r - 1] += 1;
    for (std::size_t e = 0; e < net::tls_error_count; ++e)
      consumer_errors[e] += value(c.stats().tls_errors[e]);
  });
  auto connections =
      family("gatewayd_tls_connections",
             "Open TLS connections by leg (supplier, consumer) and by who seals and opens their "
             "records: openssl, kernel-send (the kernel seals, OpenSSL opens), kernel.",
             MetricType::Gauge);
  auto errors = family("gatewayd_tls_errors_total",
                       "TLS connections that ended after their handshake other than by an "
                       "orderly close, by leg and reason.",
                       MetricType::Counter);
  const auto& st = s_.suppliers;
  for (std::size_t r = 0; r < net::tls_records_count; ++r) {
    const std::string records{net::to_string(static_cast<net::tls_records>(r))};
    add_sample(connections,
               static_cast<double>(st.tls_connections[r].load(std::memory_order_relaxed)),
               {{"leg", "supplier"}, {"records", records}});
    add_sample(connections, consumer_connections[r], {{"leg", "consumer"}, {"records", records}});
  }
  for (std::size_t e = 0; e < net::tls_error_count; ++e) {
    const std::string reason{net::to_string(static_cast<net::tls_error>(e))};
    add_sample(errors, value(st.tls_errors[e]), {{"leg", "supplier"}, {"reason", reason}});
    add_sample(errors, consumer_errors[e], {{"leg", "consumer"}, {"reason", reason}});
  }
  out.push_back(std::move(connections));
  out.push_back(std::move(errors));
  out.push_back(family_of_one("gatewayd_supplier_tls_handshakes_total",
                              "TLS handshakes completed on the supplier listener.",
                              MetricType::Counter, value(st.tls_handshakes)));
  auto tls_failures = family("gatewayd_supplier_tls_handshake_failures_total",
                             "TLS handshakes on the supplier listener that failed, by reason.",
                             MetricType::Counter);
  add_by_reason<net::tls_failure>(tls_failures, st.tls_failures);
  out.push_back(std::move(tls_failures));
  // Always exported (without samples when no [tls]), so alerts on it always parse against it.
  auto expiry = family("gatewayd_tls_certificate_expiry_timestamp_seconds",
                       "When each loaded TLS certificate expires (notAfter, Unix seconds).",
                       MetricType::Gauge);
  if (s_.certificates) {
    for (const auto& c : s_.certificates())
      add_sample(expiry, c.not_after, {{"file", c.file}});
  }
  out.push_back(std::move(expiry));
  auto crl = family("gatewayd_tls_crl_next_update_timestamp_seconds",
                    "When each loaded CRL should be replaced (nextUpdate, Unix seconds); a CRL "
                    "past it is still used.",
                    MetricType::Gauge);
  if (s_.crls) {
    for (const auto& c : s_.crls())
      add_sample(crl, c.next_update, {{"file", c.file}, {"issuer", c.issuer}});
  }
  out.push_back(std::move(crl));
}

void gateway_collector::collect_runtime(std::vector<prometheus::MetricFamily>& out) const {
  auto latency = family("gatewayd_lf_promotion_latency_seconds",
                        "Leader/Followers: from the leader detecting an event to the promoted "
                        "follower waiting as the new leader.",
                        MetricType::Histogram);
  add_histogram(latency, s_.promotion_latency.read());
  out.push_back(std::move(latency));

  auto threads =
      family("gatewayd_lf_threads", "Pool threads by Leader/Followers role.", MetricType::Gauge);
  const thread_roles r = s_.roles ? s_.roles() : thread_roles{};
  add_sample(threads, r.leader, {{"role", "leader"}});
  add_sample(threads, r.processing, {{"role", "processing"}});
  add_sample(threads, r.follower, {{"role", "follower"}});
  out.push_back(std::move(threads));
  out.push_back(family_of_one("gatewayd_lf_promotions_without_follower_total",
                              "Leader hand-offs that found no idle follower: every pool thread was "
                              "busy processing (the pool is saturated).",
                              MetricType::Counter,
                              static_cast<double>(r.promotions_without_follower)));
  out.push_back(
      family_of_one("gatewayd_lf_leadership_taken_back_total",
                    "Promotions ended by the old leader leading again: its event was done "
                    "before the promoted follower had started to run.",
                    MetricType::Counter, static_cast<double>(r.leadership_taken_back)));

  out.push_back(
      family_of_one("gatewayd_queued_bytes",
                    "Bytes queued across all consumers (the max_queued_bytes budget in use).",
                    MetricType::Gauge, static_cast<double>(s_.budget.used())));
  out.push_back(family_of_one(
      "gatewayd_frame_memory_bytes",
      "Memory of the read chunks that hold frames: queued ones, ones being written, the "
      "suppliers' current reads, and a few free chunks per thread. Within 1.25 x "
      "gatewayd_queued_bytes plus a few MiB.",
      MetricType::Gauge, static_cast<double>(consumers::queue_memory::chunk_bytes())));
  out.push_back(family_of_one(
      "gatewayd_queue_slot_bytes",
      "Memory of the slots that point at queued and routed frames, 24 bytes each: the consumers' "
      "queue rings (up to queue_capacity slots once a queue filled), their write batches (about "
      "40 KiB for one that once wrote a full batch) and the routing threads' per-consumer "
      "batches (about one read's frames each).",
      MetricType::Gauge,
      static_cast<double>(consumers::queue_memory::slot_bytes() +
                          suppliers::frame_router::scratch_bytes())));
  out.push_back(family_of_one(
      "gatewayd_frame_memory_returned_bytes_total",
      "Memory handed back to the system after the queues let go of it: by how much the bytes "
      "queued and the chunk memory alive had fallen since the last time.",
      MetricType::Counter, static_cast<double>(s_.queue_memory.returned_bytes())));
}

void gateway_collector::collect_config(std::vector<prometheus::MetricFamily>& out) const {
  auto reloads = family("gatewayd_config_reloads_total", "Routing-table reloads, by result.",
                        MetricType::Counter);
  add_sample(reloads, value(s_.reloads.succeeded), {{"result", "success"}});
  add_sample(reloads, value(s_.reloads.failed), {{"result", "failure"}});
  out.push_back(std::move(reloads));
  out.push_back(family_of_one("gatewayd_config_last_reload_successful",
                              "1 if the last routing-table reload succeeded, else 0.",
                              MetricType::Gauge, s_.reloads.last_successful.load() ? 1 : 0));
  out.push_back(family_of_one("gatewayd_config_last_reload_success_timestamp_seconds",
                              "Unix time of the last successful routing-table load.",
                              MetricType::Gauge, s_.reloads.last_success_unix_seconds.load()));

  const auto snap = s_.routes.load();
  out.push_back(family_of_one("gatewayd_routing_table_routes",
                              "Routes in the routing table in use.", MetricType::Gauge,
                              snap ? static_cast<double>(snap->table->route_count()) : 0));
  // Nodes meant to run the same table show one sha256 each: `count(count by (sha256)
  // (gatewayd_config_info)) > 1` is drift.
  auto config =
      family("gatewayd_config_info",
             "Always 1; the sha256 label is the SHA-256 of the routing table file in use.",
             MetricType::Gauge);
  if (snap) add_sample(config, 1, {{"sha256", snap->sha256}});
  out.push_back(std::move(config));

  auto info = family("gatewayd_build_info", "Always 1; the version label names the build.",
                     MetricType::Gauge);
  add_sample(info, 1, {{"version", s_.version}});
  out.push_back(std::move(info));
}

}  // namespace gatewayd::metrics
