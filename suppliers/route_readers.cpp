#include "suppliers/route_readers.hpp"

#include <algorithm>
#include <cassert>

namespace gatewayd::suppliers {

route_readers::slot::slot(route_readers& readers) : readers_(readers) {
  std::lock_guard lock(readers_.mutex_);
  readers_.slots_.push_back(this);
}

route_readers::slot::~slot() {
  std::lock_guard lock(readers_.mutex_);
  readers_.slots_.erase(std::find(readers_.slots_.begin(), readers_.slots_.end(), this));
}

route_readers::~route_readers() {
  // A slot left behind would unregister from freed memory: its router must go first.
  assert(slots_.empty());
}

bool route_readers::all_past(std::uint64_t version) const {
  std::lock_guard lock(mutex_);
  return std::all_of(slots_.begin(), slots_.end(), [version](const slot* s) {
    const std::uint64_t v = s->version_.load(std::memory_order_seq_cst);
    return v == slot::idle || v >= version;
  });
}

}  // namespace gatewayd::suppliers
