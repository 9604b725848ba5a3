#include "suppliers/frame_routers.hpp"

#include <algorithm>

#include "runtime/lf_pool.hpp"

namespace gatewayd::suppliers {

frame_routers::frame_routers(route_readers& readers, const runtime::lf_pool* pool)
    : readers_(readers), pool_(pool) {
  const unsigned threads = pool ? pool->size() : 0;
  members_.reserve(threads);
  for (unsigned i = 0; i < threads; ++i)
    members_.push_back(std::make_unique<frame_router>(readers_));
}

frame_router& frame_routers::this_threads() {
  const unsigned i = pool_ ? pool_->member_index() : runtime::lf_pool::not_a_member;
  return i < members_.size() ? *members_[i] : outsiders();
}

// A router is used by one thread at a time: the thread it was made for. The lock guards only
// the list; the router it returns stays where it is (held by pointer) however the list grows.
// A new one is made outside the lock (its slot takes route_readers' lock: no nesting); only
// this thread adds this thread's.
frame_router& frame_routers::outsiders() {
  const auto me = std::this_thread::get_id();
  {
    std::lock_guard lock(outsiders_mutex_);
    const auto it = std::find_if(outsiders_.begin(), outsiders_.end(),
                                 [me](const auto& o) { return o.first == me; });
    if (it != outsiders_.end()) return *it->second;
  }
  auto made = std::make_unique<frame_router>(readers_);
  frame_router& router = *made;
  std::lock_guard lock(outsiders_mutex_);
  outsiders_.emplace_back(me, std::move(made));
  return router;
}

}  // namespace gatewayd::suppliers
