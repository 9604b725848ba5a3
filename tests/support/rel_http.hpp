// A tiny blocking HTTP/1.0 GET over loopback for tests that scrape gatewayd's /metrics.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace gatewayd::test {

// The body of GET http://127.0.0.1:PORT/PATH, or nullopt on any failure or a non-200 status.
std::optional<std::string> http_get(unsigned short port, const std::string& path = "/metrics",
                                    std::chrono::milliseconds timeout = std::chrono::seconds(5));

// The value of the sample whose name-and-labels text is exactly `series` (for example
// `gatewayd_supplier_connections_closed_total{reason="not_allowed"}`), or nullopt.
std::optional<double> metric_value(const std::string& exposition, const std::string& series);

// Scrapes and returns the value of `series`, or -1 when the scrape or the series is missing.
double scrape_metric(unsigned short port, const std::string& series);

}  // namespace gatewayd::test
