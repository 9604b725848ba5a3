// The running consumers and the route snapshot that names them: a new routes table is diffed
// against them by name (kept ones reconfigured, new ones started, removed ones retired) and
// published whole, for the stop to drain in the end.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/routes_config.hpp"
#include "config/service_config.hpp"
#include "consumers/confirm_share.hpp"
#include "consumers/consumer.hpp"
#include "consumers/consumer_group.hpp"
#include "consumers/spool_thread.hpp"
#include "gateway/consumer_retirement.hpp"
#include "routing/publish_drop_counters.hpp"
#include "routing/routing_table.hpp"
#include "runtime/byte_budget.hpp"
#include "runtime/executor.hpp"
#include "suppliers/route_snapshot.hpp"

namespace gatewayd::gateway {

// Runs on the gateway's control strand (and in its constructor, before the threads start), as
// reloads and the stop do; routing threads only read the published snapshot (routes()).
class consumer_set {
 public:
  // New consumers take their dial, redial and slow-consumer settings from `settings` (the
  // running ones) as they are when they start. Every snapshot's permissions count into
  // `not_permitted`.
  consumer_set(const runtime::executor& ex, runtime::strand& control,
               const config::service_config& settings,
               std::shared_ptr<routing::publish_drop_counters> not_permitted);
  consumer_set(const consumer_set&) = delete;
  consumer_set& operator=(const consumer_set&) = delete;

  // Publishes `table` (built from `routes`) with the consumers `routes` names: one whose name
  // runs already is reconfigured in place (its queue and connection stay unless its endpoint or
  // TLS settings changed), a new one starts dialing, one whose `ack` changed is replaced (the
  // running one retired, a new one started), and a running one `routes` no longer names is
  // retired: exported beside the new snapshot, it drains once no read pass routes by a table
  // that names it (consumer_retirement).
  void apply(const config::routes_config& routes, std::string routes_sha256,
             std::shared_ptr<const routing::routing_table> table);

  // The stop: every running consumer drains for at most `within` (retired ones start theirs
  // now, on their own deadlines); `drained(undelivered frames)` runs on the control strand once
  // every running one has closed, at once when none runs.
  void drain(std::chrono::milliseconds within, std::function<void(std::uint64_t)> drained);
  // A second signal: every drain, of running and retired consumers, ends now. Safe to call
  // again, and after the running ones drained (retired ones may still be draining).
  void cut_short();

  std::size_t size() const noexcept { return running_.size(); }
  // A copy of the running consumers, for a thread that must not touch this set.
  std::vector<std::shared_ptr<consumers::consumer>> running() const;
  // What systemd's STATUS shows: "serving: N consumers, M routes".
  std::string status() const;
  // One line per running consumer: frames sent and dropped, the last values no scrape reads.
  void log_totals() const;

  const suppliers::route_snapshot_holder& routes() const noexcept { return routes_; }
  const runtime::byte_budget& budget() const noexcept { return budget_; }
  const consumers::confirm_share& confirms() const noexcept { return confirms_; }
  // What the frame routers announce their read passes in (consumer_retirement).
  suppliers::route_readers& readers() noexcept { return retirement_.readers(); }

 private:
  // By (name, member): a group's members share its name; a single consumer's member is empty.
  using running_map =
      std::map<std::pair<std::string, std::string>, std::shared_ptr<consumers::consumer>>;
  using group_map = std::map<std::string, std::shared_ptr<consumers::consumer_group>>;

  consumers::consumer::options consumer_options();
  // apply()'s steps. The consumer `spec` names, kept (reconfigured) or started (a replaced one
  // retired), added to `snapshot` and `next`.
  std::shared_ptr<consumers::consumer> keep_or_start(const consumers::consumer_spec& spec,
                                                     suppliers::route_snapshot& snapshot,
                                                     running_map& next);
  // The snapshot's target for `spec`: its consumer, or a group over one consumer per endpoint.
  void add_target(const consumers::consumer_spec& spec, suppliers::route_snapshot& snapshot,
                  running_map& next, group_map& groups);
  // The running consumers `next` no longer names leave their group (to `groups`' one of the same
  // name, if any) and are retired.
  void retire_removed(const running_map& next, const group_map& groups);
  // A new consumer with spool_max_bytes gets its spool (spool_dir/NAME) before it starts.
  void open_spool(consumers::consumer& c, const consumers::consumer_spec& spec);

  runtime::executor executor_;
  runtime::strand& control_;
  const config::service_config& settings_;
  std::shared_ptr<routing::publish_drop_counters> not_permitted_;
  // max_queued_bytes. Before routes_ and running_: a consumer freed with frames still queued
  // gives their bytes back here.
  runtime::byte_budget budget_;
  // The spools' thread, made for the first consumer with spool_max_bytes. Before routes_ and
  // running_: a consumer's spool is its, and is let go before it stops (and syncs them all).
  std::unique_ptr<consumers::spool_thread> spools_;
  // Each consumer's share of max_confirm_ledger_bytes, shared out again by each apply().
  consumers::confirm_share confirms_;
  suppliers::route_snapshot_holder routes_;
  running_map running_;
  consumer_retirement retirement_;
};

}  // namespace gatewayd::gateway
