// The last thing that went wrong with a consumer's connection, as /connz shows it: written by
// its link where it logs (a failed dial, a lost connection, a slow-consumer cut), read by the
// operator API's thread. Rare on both sides, so a small mutex of its own is enough.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>

namespace gatewayd::consumers {

class last_error {
 public:
  struct value {
    std::string message;
    std::chrono::system_clock::time_point at;
  };

  void set(std::string message) {
    const auto now = std::chrono::system_clock::now();
    std::lock_guard lock(mutex_);
    value_ = value{std::move(message), now};
  }
  std::optional<value> get() const {
    std::lock_guard lock(mutex_);
    return value_;
  }

 private:
  mutable std::mutex mutex_;
  std::optional<value> value_;
};

}  // namespace gatewayd::consumers
