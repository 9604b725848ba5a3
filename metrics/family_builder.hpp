// Small helpers that build prometheus-cpp metric families from plain values at scrape time.
#pragma once

#include <prometheus/metric_family.h>

#include <initializer_list>
#include <string>
#include <utility>

#include "runtime/latency_histogram.hpp"

namespace gatewayd::metrics {

using labels = std::initializer_list<std::pair<const char*, std::string>>;

prometheus::MetricFamily family(std::string name, std::string help, prometheus::MetricType type);
void add_sample(prometheus::MetricFamily& f, double value, labels l = {});
void add_histogram(prometheus::MetricFamily& f, const runtime::latency_histogram::snapshot& s);

}  // namespace gatewayd::metrics
