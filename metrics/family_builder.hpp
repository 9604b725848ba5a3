// Small helpers that build prometheus-cpp metric families from plain values at scrape time.
#pragma once

#include <prometheus/metric_family.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "runtime/latency_histogram.hpp"

namespace gatewayd::metrics {

using labels = std::initializer_list<std::pair<const char*, std::string>>;

// A counter or a flag read at scrape time, as a sample's value.
inline double value(const std::atomic<std::uint64_t>& a) {
  return static_cast<double>(a.load(std::memory_order_relaxed));
}
inline double flag(const std::atomic<bool>& b) {
  return b.load(std::memory_order_relaxed) ? 1 : 0;
}

prometheus::MetricFamily family(std::string name, std::string help, prometheus::MetricType type);
void add_sample(prometheus::MetricFamily& f, double value, labels l = {});
// A family of one unlabelled sample: most of the gateway's counters and gauges.
prometheus::MetricFamily family_of_one(std::string name, std::string help,
                                       prometheus::MetricType type, double value);
void add_histogram(prometheus::MetricFamily& f, const runtime::latency_histogram::snapshot& s);

// One sample per value of `Enum` from its per-value counters, labelled reason="<to_string of the
// value>" (found next to the enum) and, when given, consumer. Every reason is exported from the
// start: rate() needs the zeros. Values below `first` are skipped (an enum's "no error"), and
// from `end` on (reasons that cannot happen to this consumer).
template <class Enum, std::size_t N>
void add_by_reason(prometheus::MetricFamily& f,
                   const std::array<std::atomic<std::uint64_t>, N>& counters,
                   const std::string& consumer = {}, std::size_t first = 0, std::size_t end = N) {
  for (std::size_t r = first; r < std::min(end, N); ++r) {
    const double v = static_cast<double>(counters[r].load(std::memory_order_relaxed));
    std::string reason(to_string(static_cast<Enum>(r)));
    if (consumer.empty()) {
      add_sample(f, v, {{"reason", std::move(reason)}});
    } else {
      add_sample(f, v, {{"consumer", consumer}, {"reason", std::move(reason)}});
    }
  }
}

}  // namespace gatewayd::metrics
