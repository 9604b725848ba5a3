#include "runtime/log_limit.hpp"

#include <string>

namespace gatewayd::log {
namespace {

// Every limited_site ever used, newest first; pushed lock-free, never popped.
std::atomic<limited_site*> sites{nullptr};

std::int64_t ns_of(rate_limit::clock::time_point t) noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

rate_limit::verdict rate_limit::admit(clock::time_point now) noexcept {
  const std::int64_t t = ns_of(now);
  std::int64_t next = next_ns_.load(std::memory_order_relaxed);
  // Of the threads that find the period over, exactly one wins the exchange and writes.
  if (t < next || !next_ns_.compare_exchange_strong(next, t + period_ns_)) {
    suppressed_.fetch_add(1, std::memory_order_relaxed);
    return {};
  }
  return {true, suppressed_.exchange(0, std::memory_order_relaxed)};
}

std::uint64_t rate_limit::take_expired(clock::time_point now) noexcept {
  if (ns_of(now) < next_ns_.load(std::memory_order_relaxed)) return 0;
  if (suppressed_.load(std::memory_order_relaxed) == 0) return 0;
  return suppressed_.exchange(0, std::memory_order_relaxed);
}

limited_site::limited_site(level l, std::string_view kind) noexcept : level_(l), kind_(kind) {
  next_ = sites.load(std::memory_order_relaxed);
  while (!sites.compare_exchange_weak(next_, this, std::memory_order_release,
                                      std::memory_order_relaxed)) {
  }
}

void flush_suppressed(rate_limit::clock::time_point now) noexcept {
  for (limited_site* s = sites.load(std::memory_order_acquire); s; s = s->next()) {
    const std::uint64_t n = s->limit().take_expired(now);
    if (n == 0 || !enabled(s->severity())) continue;
    try {
      std::string text{s->kind()};
      text += ": ";
      text += std::to_string(n);
      text += " more suppressed";
      write(s->severity(), text);
    } catch (...) {
      // Logging must never take the gateway down.
    }
  }
}

}  // namespace gatewayd::log
