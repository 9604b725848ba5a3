// The suppliers a consumer asked to stop reading (backpressure): remembered under the consumer's
// lock, resumed outside it, held weakly: a paused session keeps itself alive (its pause timer)
// and one whose peer left is closed and freed without waiting for this consumer.
#pragma once

#include <algorithm>
#include <memory>
#include <vector>

#include "consumers/flow_control.hpp"

namespace gatewayd::consumers {

class paused_suppliers {
 public:
  // Under the consumer's lock. Cheap dedupe of the common repeat (one supplier pausing again);
  // resume_released() removes the rest.
  void add(const std::shared_ptr<flow_control_listener>& l) {
    if (!l) return;
    if (!paused_.empty() && same(paused_.back(), l)) return;
    paused_.push_back(l);
  }
  bool empty_locked() const noexcept { return paused_.empty(); }
  // Under the consumer's lock: who is paused (repeats included), for the caller to tell them
  // something outside it. Only when the consumer falls behind: it may allocate.
  void copy_paused_locked(std::vector<std::weak_ptr<flow_control_listener>>& out) const {
    out.insert(out.end(), paused_.begin(), paused_.end());
  }

  // Under the consumer's lock, on its strand: everyone paused becomes due for resuming. Both
  // vectors keep their capacity, so pausing and resuming allocate nothing once warm.
  void release_locked() {
    if (paused_.empty()) return;
    if (due_.empty()) {
      due_.swap(paused_);
    } else {
      due_.insert(due_.end(), paused_.begin(), paused_.end());
      paused_.clear();
    }
  }

  // Outside the lock, on the consumer's strand: resumes each released supplier still alive, once.
  void resume_released() {
    if (due_.empty()) return;
    std::sort(due_.begin(), due_.end(),
              [](const auto& a, const auto& b) { return a.owner_before(b); });
    due_.erase(std::unique(due_.begin(), due_.end(),
                           [](const auto& a, const auto& b) { return same(a, b); }),
               due_.end());
    for (const auto& w : due_) {
      if (auto l = w.lock()) l->resume_reading();
    }
    due_.clear();
  }

 private:
  template <class A, class B>
  static bool same(const A& a, const B& b) noexcept {
    return !a.owner_before(b) && !b.owner_before(a);
  }

  std::vector<std::weak_ptr<flow_control_listener>> paused_;  // under the consumer's lock
  std::vector<std::weak_ptr<flow_control_listener>> due_;     // strand-only
};

}  // namespace gatewayd::consumers
