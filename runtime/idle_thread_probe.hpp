// What a busy read pass asks before it leaves its writes to another thread: is one of the pool's
// threads idle, so that work posted now starts at once?
#pragma once

#include "runtime/lf_pool.hpp"

namespace gatewayd::runtime {

// The gateway gives the supplier sessions one over its pool (through their context); a
// default one, for code that runs outside a pool (unit tests, tools), always says no: the
// caller then writes itself. A pointer's load and the pool's one atomic load: no lock.
class idle_thread_probe {
 public:
  idle_thread_probe() = default;
  explicit idle_thread_probe(const lf_pool& pool) noexcept : pool_(&pool) {}

  // lf_pool::idle_thread_waiting(): true only on a thread of that pool, with another idle.
  bool any_waiting() const noexcept { return pool_ && pool_->idle_thread_waiting(); }

 private:
  const lf_pool* pool_ = nullptr;
};

}  // namespace gatewayd::runtime
