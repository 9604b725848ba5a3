#include "routing/publish_drop_counters.hpp"

namespace gatewayd::routing {

std::atomic<std::uint64_t>* publish_drop_counters::counter(std::string_view name) {
  if (name.empty()) name = default_name;
  std::lock_guard lock(mutex_);
  auto it = by_name_.find(name);
  if (it == by_name_.end()) it = by_name_.try_emplace(std::string{name}, 0).first;
  return &it->second;
}

std::vector<std::pair<std::string, std::uint64_t>> publish_drop_counters::values() const {
  std::lock_guard lock(mutex_);
  std::vector<std::pair<std::string, std::uint64_t>> out;
  out.reserve(by_name_.size());
  for (const auto& [name, count] : by_name_)
    out.emplace_back(name, count.load(std::memory_order_relaxed));
  return out;
}

}  // namespace gatewayd::routing
