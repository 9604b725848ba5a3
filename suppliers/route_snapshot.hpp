// What a supplier session routes by: one routing-table version paired with the live consumer
// objects its indices name, published whole and swapped atomically on reload.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "consumers/consumer.hpp"
#include "consumers/consumer_group.hpp"
#include "routing/publish_permissions.hpp"
#include "routing/routing_table.hpp"

namespace gatewayd::suppliers {

// What one routing::consumer_index names: a consumer, or a group of them.
struct route_target {
  consumers::consumer* single = nullptr;       // owned by route_snapshot::consumers
  consumers::consumer_group* group = nullptr;  // owned by route_snapshot::groups

  consumers::consumer::put_result put(std::span<const protocol::frame_slice> frames,
                                      const std::shared_ptr<consumers::flow_control_listener>& l,
                                      consumers::group_scratch& scratch, bool drain_here) const {
    return group ? group->put(frames, l, scratch, drain_here) : single->put(frames, l, drain_here);
  }
};

struct route_snapshot {
  std::shared_ptr<const routing::routing_table> table;
  // Every consumer object: each single consumer and each group member, in file order. Without
  // groups (and when `targets` is empty) its position is its routing::consumer_index.
  std::vector<std::shared_ptr<consumers::consumer>> consumers;
  std::vector<consumers::consumer_spec> specs;  // what each was configured with (members: theirs)
  // By routing::consumer_index: what the router hands a consumer's frames to.
  std::vector<route_target> targets;
  std::vector<std::shared_ptr<consumers::consumer_group>> groups;

  consumers::consumer::put_result put(std::size_t index,
                                      std::span<const protocol::frame_slice> frames,
                                      const std::shared_ptr<consumers::flow_control_listener>& l,
                                      consumers::group_scratch& scratch, bool drain_here) const {
    if (index < targets.size()) return targets[index].put(frames, l, scratch, drain_here);
    return consumers[index]->put(frames, l, drain_here);
  }
  // Who may publish what, from the same routes.toml: swapped with the table, never apart.
  // Null = everyone everything.
  std::shared_ptr<const routing::publish_permissions> permissions;
  // Consumers earlier reloads removed, still draining or closed since the previous reload: never
  // routed to, only exported, so that their last counts (reason="removed") can be scraped.
  std::vector<std::shared_ptr<consumers::consumer>> retired;
  std::string sha256;  // of the routes file the table was built from: drift between nodes
  std::chrono::system_clock::time_point loaded_at{};
  std::uint64_t version = 0;  // unique in the process and increasing (route_readers compares them)
  // Frames routed by each pattern (routing::pattern_index) since this snapshot was published:
  // counters, not state, added to once per routing pass by the frame routers (/routez).
  std::unique_ptr<std::atomic<std::uint64_t>[]> pattern_hits;
};

// Readers poll version() (one load of a rarely written line) and take the
// snapshot, under the mutex, only when it changed: the routing path takes no lock per frame.
class route_snapshot_holder {
 public:
  // Returns the version given to `next`.
  std::uint64_t publish(std::shared_ptr<route_snapshot> next) {
    static std::atomic<std::uint64_t> versions{0};
    if (next->table) {
      next->pattern_hits =
          std::make_unique<std::atomic<std::uint64_t>[]>(next->table->pattern_count());
    }
    std::lock_guard lock(mutex_);
    const std::uint64_t v = versions.fetch_add(1, std::memory_order_relaxed) + 1;
    next->version = v;
    current_ = std::move(next);
    version_.store(v, std::memory_order_seq_cst);  // see route_readers::slot::enter
    return v;
  }
  std::shared_ptr<const route_snapshot> load() const {
    std::lock_guard lock(mutex_);
    return current_;
  }
  std::uint64_t version() const noexcept { return version_.load(std::memory_order_seq_cst); }

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<const route_snapshot> current_;
  std::atomic<std::uint64_t> version_{0};
};

}  // namespace gatewayd::suppliers
