// Which routing-table version each routing thread is routing by right now: tells a reload when
// no pass still hands frames to consumers only an older table names.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace gatewayd::suppliers {

// Owned by whoever retires consumers (the gateway's consumer_retirement), which asks all_past();
// each router's slot registers with it. One slot per router, written only by the thread routing
// through it: two plain stores per read pass, on a line nobody else writes. A reload reads them
// all, rarely. Outlives its slots.
class route_readers {
 public:
  class slot {
   public:
    explicit slot(route_readers& readers);
    ~slot();
    slot(const slot&) = delete;
    slot& operator=(const slot&) = delete;

    // Sequentially consistent, as is the table's version check that follows it (Dekker): either
    // the reader sees the newer table, or the reload sees the reader still on the older one.
    void enter(std::uint64_t version) noexcept {
      version_.store(version, std::memory_order_seq_cst);
    }
    void leave() noexcept { version_.store(idle, std::memory_order_release); }

   private:
    friend class route_readers;
    static constexpr std::uint64_t idle = 0;
    alignas(64) std::atomic<std::uint64_t> version_{idle};
    route_readers& readers_;  // read only when the slot goes
  };

  route_readers() = default;
  ~route_readers();
  route_readers(const route_readers&) = delete;
  route_readers& operator=(const route_readers&) = delete;

  // True once no slot is inside a pass that routes by a table older than `version` (table
  // versions are unique and increasing across the process, route_snapshot.hpp).
  bool all_past(std::uint64_t version) const;

 private:
  mutable std::mutex mutex_;
  std::vector<const slot*> slots_;
};

}  // namespace gatewayd::suppliers
