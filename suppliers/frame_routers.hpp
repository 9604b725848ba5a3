// The frame routers the supplier sessions route through, one per thread that routes: each read
// pass takes the router of the thread it runs on.
#pragma once

#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "suppliers/frame_router.hpp"
#include "suppliers/route_readers.hpp"
#include "suppliers/route_snapshot.hpp"

namespace gatewayd::runtime {
class lf_pool;
}

namespace gatewayd::suppliers {

// Owned beside the sessions' context, for as long as any session may read. A thread of the pool
// finds its router by its place in the pool (lf_pool::member_index): one lookup per pass, no
// lock, nothing allocated. Any other thread that routes (a test's or a tool's own io_context
// thread) gets a router of its own on its first pass, under a lock, and keeps it: that path
// is not the daemon's, whose sessions only run on its pool.
class frame_routers {
 public:
  // Every router's passes are announced in `readers`, which must outlive them. One router for
  // each of `pool`'s threads is made now; without a pool every thread is an outsider.
  explicit frame_routers(route_readers& readers, const runtime::lf_pool* pool = nullptr);
  frame_routers(const frame_routers&) = delete;
  frame_routers& operator=(const frame_routers&) = delete;

  // Starts a pass on the calling thread's router by the newest table in `routes`; the router's
  // flush() ends it.
  frame_router& begin_pass(const route_snapshot_holder& routes) {
    frame_router& r = this_threads();
    r.begin_pass(routes);
    return r;
  }

 private:
  frame_router& this_threads();
  frame_router& outsiders();

  route_readers& readers_;
  const runtime::lf_pool* const pool_;
  std::vector<std::unique_ptr<frame_router>> members_;  // by lf_pool::member_index()
  std::mutex outsiders_mutex_;
  std::vector<std::pair<std::thread::id, std::unique_ptr<frame_router>>> outsiders_;
};

}  // namespace gatewayd::suppliers
