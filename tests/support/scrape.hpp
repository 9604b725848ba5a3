// One-call reads of a single series from the running gateway's /metrics, for tests.
#pragma once

#include <string>

namespace gatewayd::test {

// Scrapes 127.0.0.1:PORT/metrics and returns the value of `series` exactly as printed (for
// example `gatewayd_supplier_connections_closed_total{reason="not_allowed"}`), or -1 when
// the scrape fails or the series is missing.
double scrape_metric(unsigned short port, const std::string& series);

}  // namespace gatewayd::test
