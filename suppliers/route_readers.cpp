#include "suppliers/route_readers.hpp"

#include <algorithm>

namespace gatewayd::suppliers {

route_readers& route_readers::instance() {
  static route_readers readers;
  return readers;
}

route_readers::slot::slot() {
  auto& r = instance();
  std::lock_guard lock(r.mutex_);
  r.slots_.push_back(this);
}

route_readers::slot::~slot() {
  auto& r = instance();
  std::lock_guard lock(r.mutex_);
  r.slots_.erase(std::find(r.slots_.begin(), r.slots_.end(), this));
}

bool route_readers::all_past(std::uint64_t version) {
  auto& r = instance();
  std::lock_guard lock(r.mutex_);
  return std::all_of(r.slots_.begin(), r.slots_.end(), [version](const slot* s) {
    const std::uint64_t v = s->version_.load(std::memory_order_seq_cst);
    return v == slot::idle || v >= version;
  });
}

}  // namespace gatewayd::suppliers
