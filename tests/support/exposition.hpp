// Reads samples out of a Prometheus text exposition, for tests that scrape gatewayd.
#pragma once

#include <optional>
#include <set>
#include <string>

namespace gatewayd::test {

// The value of the sample whose series is exactly `series` as printed, e.g.
// `gatewayd_consumer_queue_depth{consumer="a"}` or `gatewayd_messages_unroutable_total`.
std::optional<double> sample_value(const std::string& exposition, const std::string& series);
// Sum of every sample of metric `name` whose labels contain `label_filter` (e.g. `role=`).
double sum_samples(const std::string& exposition, const std::string& name,
                   const std::string& label_filter = "");
// The metric names of all samples (histograms give their _bucket/_sum/_count names).
std::set<std::string> sample_names(const std::string& exposition);

}  // namespace gatewayd::test
