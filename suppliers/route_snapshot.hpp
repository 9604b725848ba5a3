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
#include "routing/publish_permissions.hpp"
#include "routing/routing_table.hpp"

namespace gatewayd::suppliers {

struct route_snapshot {
  std::shared_ptr<const routing::routing_table> table;
  std::vector<std::shared_ptr<consumers::consumer>> consumers;  // by routing::consumer_index
  std::vector<consumers::consumer_spec> specs;                  // what each was configured with
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
