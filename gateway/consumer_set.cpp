#include "gateway/consumer_set.hpp"

#include <sstream>

#include "runtime/log.hpp"

namespace gatewayd::gateway {

consumer_set::consumer_set(const runtime::executor& ex, runtime::strand& control,
                           const config::service_config& settings,
                           std::shared_ptr<routing::publish_drop_counters> not_permitted)
    : executor_(ex),
      control_(control),
      settings_(settings),
      not_permitted_(std::move(not_permitted)),
      budget_(settings.max_queued_bytes),
      retirement_(control) {}

consumers::consumer::options consumer_set::consumer_options() {
  consumers::consumer::options options;
  options.reconnect_initial = settings_.reconnect_initial;
  options.reconnect_max = settings_.reconnect_max;
  options.slow_after = settings_.slow_consumer;
  options.budget = &budget_;
  options.confirms = &confirms_;
  options.limits = {settings_.consumer_connect_timeout, settings_.consumer_timeout};
  return options;
}

void consumer_set::apply(const config::routes_config& routes, std::string routes_sha256,
                         std::shared_ptr<const routing::routing_table> table) {
  auto snapshot = std::make_shared<suppliers::route_snapshot>();
  snapshot->table = std::move(table);
  snapshot->sha256 = std::move(routes_sha256);
  snapshot->loaded_at = std::chrono::system_clock::now();
  snapshot->permissions = std::make_shared<const routing::publish_permissions>(
      routes.suppliers, routes.suppliers_default, not_permitted_);

  running_map next;
  group_map groups;
  for (const auto& spec : routes.consumers)
    add_target(spec, *snapshot, next, groups);
  // What a consumer may owe: an equal share of the bound among the consumers (each member of
  // a group) this table runs, before it routes a frame.
  confirms_.share_out(settings_.max_confirm_ledger_bytes, next.size());
  retire_removed(next, groups);
  snapshot->retired = retirement_.to_export(snapshot->consumers);
  // Publish first: passes that begin from here on route by the new table; the removed consumers
  // drain once the passes that began earlier are over, so what those route to them is theirs.
  retirement_.published(routes_.publish(std::move(snapshot)));
  running_ = std::move(next);
}

std::shared_ptr<consumers::consumer> consumer_set::keep_or_start(
    const consumers::consumer_spec& spec, suppliers::route_snapshot& snapshot, running_map& next) {
  std::shared_ptr<consumers::consumer> c;
  auto it = running_.find({spec.name, spec.member});
  // Acknowledgements change what a frame written to it means (held or let go): such a
  // consumer is replaced, the old one retired (drains, then lets go of what it holds).
  if (it != running_.end() && it->second->acks() != spec.ack) {
    it->second->join({});  // a replaced member drains to its own endpoint
    retirement_.retire(it->second, settings_.drain_timeout);
    it = running_.end();
  }
  if (it != running_.end()) {
    c = it->second;
    c->reconfigure(spec);
  } else {
    c = std::make_shared<consumers::consumer>(executor_, spec, consumer_options());
    if (spec.spool_max_bytes) open_spool(*c, spec);
    c->start();
  }
  snapshot.consumers.push_back(c);
  snapshot.specs.push_back(spec);
  next.emplace(std::pair{spec.name, spec.member}, c);
  return c;
}

void consumer_set::open_spool(consumers::consumer& c, const consumers::consumer_spec& spec) {
  if (!spools_) spools_ = std::make_unique<consumers::spool_thread>(settings_.spool_sync);
  const auto dir = settings_.spool_dir / spec.name;
  std::error_code ec;
  if (!c.open_spool(*spools_, dir, spec.spool_max_bytes, ec)) {
    // The consumer still runs, as one without a spool: its overflow policy applies.
    GW_LOG(error) << "consumer " << spec.name << ": spool " << dir.string() << " cannot be used ("
                  << ec.message() << "); it runs without one";
  }
}

void consumer_set::add_target(const consumers::consumer_spec& spec,
                              suppliers::route_snapshot& snapshot, running_map& next,
                              group_map& groups) {
  if (spec.endpoints.empty()) {
    snapshot.targets.push_back({keep_or_start(spec, snapshot, next).get(), nullptr});
    return;
  }
  // A group: one consumer per endpoint, named by the group, told apart by `member`.
  std::vector<std::shared_ptr<consumers::consumer>> members;
  for (const auto& at : spec.endpoints) {
    consumers::consumer_spec one = spec;
    one.endpoints.clear();
    one.address = at;
    one.member = at.to_string();
    members.push_back(keep_or_start(one, snapshot, next));
  }
  auto group =
      std::make_shared<consumers::consumer_group>(spec.name, spec.balance, std::move(members));
  group->adopt();
  snapshot.targets.push_back({nullptr, group.get()});
  snapshot.groups.push_back(group);
  groups.emplace(spec.name, std::move(group));
}

void consumer_set::retire_removed(const running_map& next, const group_map& groups) {
  for (auto& [key, c] : running_) {
    if (next.count(key)) continue;
    // A member removed from a group that stays: what it queued goes on to the other members.
    // A member of a group that is gone (or now one endpoint) drains to its own endpoint.
    if (const auto g = groups.find(key.first); g != groups.end() && !key.second.empty()) {
      c->leave_group(g->second);
    } else if (!key.second.empty()) {
      c->join({});
    }
    retirement_.retire(c, settings_.drain_timeout);
  }
}

void consumer_set::drain(std::chrono::milliseconds within,
                         std::function<void(std::uint64_t)> drained) {
  retirement_.stop(false);  // consumers a reload removed drain on their own deadlines
  if (running_.empty()) return drained(0);
  // Counted on the control strand, where each consumer's report is posted.
  struct progress {
    std::size_t left;
    std::uint64_t undelivered = 0;
    std::function<void(std::uint64_t)> drained;
  };
  auto p = std::make_shared<progress>(progress{running_.size(), 0, std::move(drained)});
  for (auto& [key, c] : running_) {
    const std::string n = key.second.empty() ? key.first : key.first + " (" + key.second + ")";
    c->drain_and_close(within, consumers::drop_reason::shutdown,
                       [control = control_, p, n](std::uint64_t left) {
                         asio::post(control, [p, n, left] {
                           if (left) {
                             GW_LOG(warning) << "consumer " << n << ": " << left
                                             << " frames undelivered at shutdown";
                           }
                           p->undelivered += left;
                           if (--p->left == 0) p->drained(p->undelivered);
                         });
                       });
  }
}

// Each consumer closes at once (a write still out is cancelled first) and reports what it
// leaves, as a drain that timed out does.
void consumer_set::cut_short() {
  retirement_.stop(true);
  for (auto& [key, c] : running_)
    c->drain_and_close(std::chrono::milliseconds(0), consumers::drop_reason::shutdown, nullptr);
}

std::vector<std::shared_ptr<consumers::consumer>> consumer_set::running() const {
  std::vector<std::shared_ptr<consumers::consumer>> out;
  out.reserve(running_.size());
  for (const auto& [key, c] : running_)
    out.push_back(c);
  return out;
}

std::string consumer_set::status() const {
  const auto snapshot = routes_.load();
  std::ostringstream s;
  s << "serving: " << (snapshot ? snapshot->targets.size() : 0) << " consumers, "
    << (snapshot && snapshot->table ? snapshot->table->route_count() : 0) << " routes";
  return s.str();
}

void consumer_set::log_totals() const {
  for (const auto& [key, c] : running_) {
    GW_LOG(info) << "totals: consumer " << key.first
                 << (key.second.empty() ? "" : " member " + key.second) << " sent "
                 << c->stats().sent_frames.load() << " frames, dropped "
                 << c->stats().dropped_total();
  }
}

}  // namespace gatewayd::gateway
