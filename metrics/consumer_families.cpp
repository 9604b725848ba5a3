// The per-consumer families of /metrics: one sample per consumer (live, or retired by a reload
// until the reload after it closed), and a `member` label on a group member's.
#include <chrono>
#include <iterator>
#include <vector>

#include "consumers/consumer.hpp"
#include "metrics/family_builder.hpp"
#include "metrics/gateway_collector.hpp"

namespace gatewayd::metrics {

using prometheus::MetricType;

namespace {

// A per-consumer series with the consumer label alone: a line here is all a new one needs.
struct consumer_series {
  const char* name;
  const char* help;
  MetricType type;
  double (*read)(const consumers::consumer&);
};

const consumer_series per_consumer[] = {
    {"gatewayd_consumer_queue_depth", "Frames queued for the consumer.", MetricType::Gauge,
     [](const consumers::consumer& c) { return value(c.stats().queued_frames); }},
    {"gatewayd_consumer_queue_bytes", "Bytes queued for the consumer.", MetricType::Gauge,
     [](const consumers::consumer& c) { return value(c.stats().queued_bytes); }},
    {"gatewayd_consumer_queue_capacity",
     "Frames the consumer's queue holds before its overflow policy applies.", MetricType::Gauge,
     [](const consumers::consumer& c) { return static_cast<double>(c.capacity()); }},
    {"gatewayd_consumer_connected", "1 while the gateway has a connection to the consumer, else 0.",
     MetricType::Gauge, [](const consumers::consumer& c) { return flag(c.stats().connected); }},
    {"gatewayd_consumer_congested",
     "1 while the consumer is not connected or has not caught up for slow_consumer_ms: its "
     "overflow policy applies. 0 while it takes what it is given (the gateway then pauses "
     "suppliers rather than drop).",
     MetricType::Gauge, [](const consumers::consumer& c) { return flag(c.stats().congested); }},
    {"gatewayd_consumer_messages_sent_total", "Frames written whole to the consumer's connection.",
     MetricType::Counter,
     [](const consumers::consumer& c) { return value(c.stats().sent_frames); }},
    {"gatewayd_consumer_bytes_sent_total", "Bytes written to the consumer's connection.",
     MetricType::Counter, [](const consumers::consumer& c) { return value(c.stats().sent_bytes); }},
    {"gatewayd_consumer_confirms_owed",
     "CONFIRM frames routed to the consumer that it has not settled (written, acknowledged, "
     "dropped): what it owes their suppliers, counted against its share of "
     "max_confirm_ledger_bytes.",
     MetricType::Gauge,
     [](const consumers::consumer& c) { return static_cast<double>(c.stats().confirms_owed()); }},
    {"gatewayd_consumer_confirms_owed_limit",
     "CONFIRM frames the consumer may owe (its share of max_confirm_ledger_bytes; 0: no bound). "
     "At it the consumer is full: a dropping policy rejects its CONFIRM frames "
     "(reason=\"confirms_owed\"), backpressure pauses the suppliers that feed it.",
     MetricType::Gauge,
     [](const consumers::consumer& c) { return static_cast<double>(c.confirm_share()); }},
    {"gatewayd_consumer_reconnects_total",
     "Times the gateway dialled the consumer again after losing it.", MetricType::Counter,
     [](const consumers::consumer& c) { return value(c.stats().reconnects); }},
    {"gatewayd_consumer_unacknowledged_bytes_total",
     "Bytes counted as sent that the consumer's host had not acknowledged when its connection "
     "failed: not delivered.",
     MetricType::Counter,
     [](const consumers::consumer& c) { return value(c.stats().unacknowledged_bytes); }},
};

// A spooled consumer's series (consumers/spool_thread.hpp's spool_stats), the consumer label
// alone: none for a consumer without a spool.
struct spool_series {
  const char* name;
  const char* help;
  MetricType type;
  double (*read)(const consumers::spool_stats&);
};

double oldest_age_seconds(const consumers::spool_stats& s) {
  const std::int64_t oldest = s.oldest_ms.load(std::memory_order_relaxed);
  if (!oldest || !s.frames.load(std::memory_order_relaxed)) return 0;
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  return now > oldest ? static_cast<double>(now - oldest) / 1e3 : 0;
}

const spool_series per_spool[] = {
    {"gatewayd_consumer_spool_frames", "Frames the consumer's spool holds on disk.",
     MetricType::Gauge, [](const consumers::spool_stats& s) { return value(s.frames); }},
    {"gatewayd_consumer_spool_bytes", "Payload bytes the consumer's spool holds on disk.",
     MetricType::Gauge, [](const consumers::spool_stats& s) { return value(s.bytes); }},
    {"gatewayd_consumer_spool_oldest_age_seconds",
     "How long the oldest frame in the consumer's spool has waited (0: empty).", MetricType::Gauge,
     oldest_age_seconds},
    {"gatewayd_consumer_spool_full",
     "1 while the spool is at spool_max_bytes or out of disk space: new frames are refused "
     "(backpressure: their suppliers paused).",
     MetricType::Gauge, [](const consumers::spool_stats& s) { return flag(s.full); }},
    {"gatewayd_consumer_spool_written_frames_total", "Frames written to the consumer's spool.",
     MetricType::Counter, [](const consumers::spool_stats& s) { return value(s.written_frames); }},
    {"gatewayd_consumer_spool_written_bytes_total", "Bytes written to the consumer's spool.",
     MetricType::Counter, [](const consumers::spool_stats& s) { return value(s.written_bytes); }},
    {"gatewayd_consumer_spool_read_frames_total",
     "Frames read back from the consumer's spool for delivery.", MetricType::Counter,
     [](const consumers::spool_stats& s) { return value(s.read_frames); }},
    {"gatewayd_consumer_spool_syncs_total", "Group commits of the consumer's spool (fdatasync).",
     MetricType::Counter, [](const consumers::spool_stats& s) { return value(s.syncs); }},
    {"gatewayd_consumer_spool_sync_seconds_total", "Time spent making the spool durable.",
     MetricType::Counter, [](const consumers::spool_stats& s) { return value(s.sync_ns) / 1e9; }},
    {"gatewayd_consumer_spool_torn_records_total",
     "Torn or corrupt records found and cut when the spool was opened (never delivered).",
     MetricType::Counter,
     [](const consumers::spool_stats& s) { return value(s.torn_records_cut); }},
    {"gatewayd_consumer_spool_refused_frames_total",
     "Frames the spool refused (full, out of disk space, an I/O error): dropped, their "
     "CONFIRM frames rejected with reason 1.",
     MetricType::Counter, [](const consumers::spool_stats& s) { return value(s.refused_frames); }},
    {"gatewayd_consumer_spool_no_space_total",
     "Spool writes or syncs that met a full disk (ENOSPC).", MetricType::Counter,
     [](const consumers::spool_stats& s) { return value(s.no_space); }},
    {"gatewayd_consumer_spool_io_errors_total", "Other errors of the spool's files.",
     MetricType::Counter, [](const consumers::spool_stats& s) { return value(s.io_errors); }},
};

// The families of one scrape with a consumer label beyond the table above, filled consumer by
// consumer; a group member's samples get its `member` label as they are added.
class consumer_families {
 public:
  consumer_families() {
    for (const auto& s : per_consumer)
      plain_.push_back(family(s.name, s.help, s.type));
    for (const auto& s : per_spool)
      spool_.push_back(family(s.name, s.help, s.type));
  }

  void add(const consumers::consumer& c) {
    auto labelled = member_labelled();
    before_.resize(labelled.size());
    for (std::size_t i = 0; i < labelled.size(); ++i)
      before_[i] = labelled[i]->metric.size();
    add_plain(c);
    if (c.acks()) add_acks(c);
    if (const auto* s = c.spool_files()) {
      for (std::size_t i = 0; i < std::size(per_spool); ++i)
        add_sample(spool_[i], per_spool[i].read(s->stats()), {{"consumer", c.name()}});
    }
    // A group member: the group's series (consumer=NAME) told apart by its endpoint.
    const std::string& m = c.member();
    if (m.empty()) return;
    for (std::size_t i = 0; i < labelled.size(); ++i) {
      auto& metrics = labelled[i]->metric;
      for (std::size_t k = before_[i]; k < metrics.size(); ++k)
        metrics[k].label.push_back({"member", m});
    }
    const auto& st = c.stats();
    const std::string& n = c.name();
    add_sample(handovers_, value(st.handovers), {{"consumer", n}, {"member", m}});
    add_sample(handover_frames_, value(st.handed_over_frames),
               {{"consumer", n}, {"member", m}, {"direction", "given"}});
    add_sample(handover_frames_, value(st.taken_over_frames),
               {{"consumer", n}, {"member", m}, {"direction", "taken"}});
  }

  // The bound unacked_bytes runs against (routes.toml max_unacked_bytes, changed in place by a
  // reload), for each ack = true consumer of the table: a dashboard and an alert need both.
  void add_limits(const suppliers::route_snapshot& snap) {
    for (std::size_t i = 0; i < snap.consumers.size() && i < snap.specs.size(); ++i) {
      // A spool's bound, beside its bytes (GatewaydSpoolFilling divides one by the other).
      if (snap.consumers[i]->spool_files()) {
        add_sample(spool_max_, static_cast<double>(snap.specs[i].spool_max_bytes),
                   {{"consumer", snap.consumers[i]->name()}});
      }
      if (!snap.consumers[i]->acks()) continue;
      add_sample(max_unacked_, static_cast<double>(snap.specs[i].max_unacked_bytes),
                 {{"consumer", snap.consumers[i]->name()}});
      if (!snap.specs[i].member.empty())
        max_unacked_.metric.back().label.push_back({"member", snap.specs[i].member});
    }
  }

  void move_to(std::vector<prometheus::MetricFamily>& out) {
    std::move(plain_.begin(), plain_.end(), std::back_inserter(out));
    std::move(spool_.begin(), spool_.end(), std::back_inserter(out));
    for (auto* f : {&dropped_, &disconnects_, &connect_failures_, &unacked_frames_, &unacked_bytes_,
                    &max_unacked_, &spool_max_, &redelivered_, &protocol_errors_, &blocked_,
                    &handovers_, &handover_frames_})
      out.push_back(std::move(*f));
  }

 private:
  // Every family but the handovers' (labelled by member already) and the limits' (from the
  // table's specs).
  std::vector<prometheus::MetricFamily*> member_labelled() {
    std::vector<prometheus::MetricFamily*> labelled{
        &dropped_,       &disconnects_, &connect_failures_, &unacked_frames_,
        &unacked_bytes_, &redelivered_, &protocol_errors_,  &blocked_};
    for (auto& f : plain_)
      labelled.push_back(&f);
    return labelled;
  }

  void add_plain(const consumers::consumer& c) {
    const auto& st = c.stats();
    const std::string& n = c.name();
    for (std::size_t i = 0; i < std::size(per_consumer); ++i)
      add_sample(plain_[i], per_consumer[i].read(c), {{"consumer", n}});
    add_sample(blocked_, value(st.blocked_lock_ns) / 1e9, {{"consumer", n}, {"cause", "lock"}});
    // A consumer without `ack` can commit one protocol error only: sending bytes back.
    if (!c.acks()) {
      constexpr auto unsolicited =
          static_cast<std::size_t>(consumers::ack_error::unsolicited_bytes);
      add_by_reason<consumers::ack_error>(protocol_errors_, st.protocol_errors, n, unsolicited,
                                          unsolicited + 1);
    }
    add_by_reason<consumers::drop_reason>(dropped_, st.dropped, n);
    add_by_reason<consumers::disconnect_reason>(disconnects_, st.disconnects, n);
    // The tls_ reasons only for TLS consumers: 8 series of zeros per plaintext one otherwise.
    add_by_reason<consumers::connect_failure>(
        connect_failures_, st.connect_failures, n, 0,
        st.tls.load(std::memory_order_relaxed)
            ? consumers::connect_failure_count
            : static_cast<std::size_t>(consumers::connect_failure::tls_timeout));
  }

  // The ack series only for ack = true consumers.
  void add_acks(const consumers::consumer& c) {
    const auto& st = c.stats();
    const std::string& n = c.name();
    add_sample(unacked_frames_, value(st.unacked_frames), {{"consumer", n}});
    add_sample(unacked_bytes_, value(st.unacked_bytes), {{"consumer", n}});
    add_sample(redelivered_, value(st.redelivered_frames), {{"consumer", n}});
    add_by_reason<consumers::ack_error>(
        protocol_errors_, st.protocol_errors, n, 1,
        static_cast<std::size_t>(consumers::ack_error::unsolicited_bytes));
  }

  std::vector<prometheus::MetricFamily> plain_;  // per_consumer's, in its order
  std::vector<prometheus::MetricFamily> spool_;  // per_spool's, in its order
  prometheus::MetricFamily dropped_ =
      family("gatewayd_consumer_dropped_messages_total",
             "Frames for the consumer that were never sent, by reason.", MetricType::Counter);
  prometheus::MetricFamily disconnects_ =
      family("gatewayd_consumer_disconnects_total", "Consumer connections that ended, by reason.",
             MetricType::Counter);
  prometheus::MetricFamily connect_failures_ =
      family("gatewayd_consumer_connect_failures_total",
             "Dials to the consumer that failed, by reason.", MetricType::Counter);
  prometheus::MetricFamily unacked_frames_ =
      family("gatewayd_consumer_unacked_frames",
             "Frames written to an ack = true consumer and not acknowledged yet (held for it).",
             MetricType::Gauge);
  prometheus::MetricFamily unacked_bytes_ =
      family("gatewayd_consumer_unacked_bytes",
             "Bytes of those frames (bounded by its max_unacked_bytes, give or take one frame).",
             MetricType::Gauge);
  prometheus::MetricFamily max_unacked_ =
      family("gatewayd_consumer_max_unacked_bytes",
             "The max_unacked_bytes of an ack = true consumer: what it may hold "
             "written and not acknowledged.",
             MetricType::Gauge);
  prometheus::MetricFamily spool_max_ =
      family("gatewayd_consumer_spool_max_bytes",
             "The spool_max_bytes of a consumer with a spool: what its spool may hold.",
             MetricType::Gauge);
  prometheus::MetricFamily redelivered_ =
      family("gatewayd_consumer_redelivered_frames_total",
             "Frames an ack = true consumer had not acknowledged when its "
             "connection ended, put back to go first to its next connection.",
             MetricType::Counter);
  prometheus::MetricFamily protocol_errors_ =
      family("gatewayd_consumer_protocol_errors_total",
             "Consumer connections closed because the consumer sent what it may not (an ack = "
             "true one something other than well-formed acks, one without ack bytes), by reason.",
             MetricType::Counter);
  prometheus::MetricFamily blocked_ =
      family("gatewayd_consumer_blocked_seconds_total",
             "Thread time spent waiting for the consumer's queue lock, counted only "
             "when contended (cause=lock).",
             MetricType::Counter);
  prometheus::MetricFamily handovers_ =
      family("gatewayd_consumer_handovers_total",
             "Times a group member failed, fell behind or left and handed what it "
             "held to the other members.",
             MetricType::Counter);
  prometheus::MetricFamily handover_frames_ =
      family("gatewayd_consumer_handover_frames_total",
             "Frames a group member handed to the others (direction=given) "
             "or took over from them (direction=taken).",
             MetricType::Counter);
  std::vector<std::size_t> before_;  // per labelled family: its samples before this consumer's
};

}  // namespace

void gateway_collector::collect_consumers(std::vector<prometheus::MetricFamily>& out) const {
  consumer_families families;
  for_each_consumer([&](const consumers::consumer& c) { families.add(c); });
  if (const auto snap = s_.routes.load()) families.add_limits(*snap);
  families.move_to(out);
}

}  // namespace gatewayd::metrics
