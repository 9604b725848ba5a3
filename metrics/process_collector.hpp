// The standard process_* metrics (CPU, memory, descriptors, start time) read from /proc at
// scrape time, as the official Prometheus clients export them.
#pragma once

#include <prometheus/collectable.h>

namespace gatewayd::metrics {

class process_collector : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override;
};

}  // namespace gatewayd::metrics
