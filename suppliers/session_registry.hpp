// The live supplier sessions, so the gateway can stop or pause them all; touched only on
// connect and disconnect, never on the data path.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace gatewayd::suppliers {

class supplier_session;

class session_registry {
 public:
  void add(const std::shared_ptr<supplier_session>& s) {
    std::lock_guard lock(mutex_);
    sessions_.emplace(s.get(), s);
  }
  void remove(const supplier_session* s) {
    std::lock_guard lock(mutex_);
    sessions_.erase(s);
  }
  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return sessions_.size();
  }
  // Calls f on every live session (outside the lock, so f may close them).
  void for_each(const std::function<void(supplier_session&)>& f) const {
    std::vector<std::shared_ptr<supplier_session>> live;
    {
      std::lock_guard lock(mutex_);
      live.reserve(sessions_.size());
      for (const auto& [_, weak] : sessions_) {
        if (auto s = weak.lock()) live.push_back(std::move(s));
      }
    }
    for (const auto& s : live)
      f(*s);
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<const supplier_session*, std::weak_ptr<supplier_session>> sessions_;
};

}  // namespace gatewayd::suppliers
