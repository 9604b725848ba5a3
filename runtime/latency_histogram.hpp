// A fixed-bucket latency histogram cheap enough to record on every L/F promotion; the
// Prometheus exporter reads it at scrape time.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace gatewayd::runtime {

class latency_histogram {
 public:
  // Upper bounds in seconds: 1 µs to 100 ms, resolving the microsecond range.
  static constexpr std::array<double, 16> bounds = {1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4,
                                                    5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 1e-1};

  void observe(std::chrono::nanoseconds d) noexcept {
    const auto ns = d.count() < 0 ? 0 : static_cast<std::uint64_t>(d.count());
    std::size_t i = 0;
    while (i < bounds.size() && static_cast<double>(ns) > bounds[i] * 1e9)
      ++i;
    counts_[i].fetch_add(1, std::memory_order_relaxed);
    sum_ns_.fetch_add(ns, std::memory_order_relaxed);
  }

  struct snapshot {
    std::array<std::uint64_t, bounds.size() + 1> counts{};  // last = above the largest bound
    std::uint64_t count = 0;
    double sum_seconds = 0;
    // The bucket bound below which a fraction q of observations fall (for tests and logs).
    double quantile_bound(double q) const noexcept;
  };
  snapshot read() const noexcept;

 private:
  std::array<std::atomic<std::uint64_t>, bounds.size() + 1> counts_{};
  std::atomic<std::uint64_t> sum_ns_{0};
};

inline latency_histogram::snapshot latency_histogram::read() const noexcept {
  snapshot s;
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    s.counts[i] = counts_[i].load(std::memory_order_relaxed);
    s.count += s.counts[i];
  }
  s.sum_seconds = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) * 1e-9;
  return s;
}

inline double latency_histogram::snapshot::quantile_bound(double q) const noexcept {
  const auto target = static_cast<std::uint64_t>(q * static_cast<double>(count) + 0.5);
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    seen += counts[i];
    if (seen >= target) return bounds[i];
  }
  return bounds.back() * 10;
}

}  // namespace gatewayd::runtime
