#include "metrics/family_builder.hpp"

#include <limits>

namespace gatewayd::metrics {

prometheus::MetricFamily family(std::string name, std::string help, prometheus::MetricType type) {
  prometheus::MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

void add_sample(prometheus::MetricFamily& f, double value, labels l) {
  prometheus::ClientMetric m;
  for (const auto& [name, v] : l)
    m.label.push_back({name, v});
  switch (f.type) {
    case prometheus::MetricType::Counter:
      m.counter.value = value;
      break;
    case prometheus::MetricType::Gauge:
      m.gauge.value = value;
      break;
    default:
      m.untyped.value = value;
      break;
  }
  f.metric.push_back(std::move(m));
}

prometheus::MetricFamily family_of_one(std::string name, std::string help,
                                       prometheus::MetricType type, double value) {
  auto f = family(std::move(name), std::move(help), type);
  add_sample(f, value);
  return f;
}

void add_histogram(prometheus::MetricFamily& f, const runtime::latency_histogram::snapshot& s) {
  prometheus::ClientMetric m;
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < runtime::latency_histogram::bounds.size(); ++i) {
    cumulative += s.counts[i];
    m.histogram.bucket.push_back({cumulative, runtime::latency_histogram::bounds[i]});
  }
  m.histogram.bucket.push_back({s.count, std::numeric_limits<double>::infinity()});
  m.histogram.sample_count = s.count;
  m.histogram.sample_sum = s.sum_seconds;
  f.metric.push_back(std::move(m));
}

}  // namespace gatewayd::metrics
