// A tiny blocking HTTP/1.0 GET over loopback for tests: scrapes /metrics and queries
// Prometheus's API without pulling in an HTTP client library.
#pragma once

#include <chrono>
#include <string>

namespace gatewayd::test {

struct http_response {
  int status = 0;  // 0 when the connection failed or the reply was not HTTP
  std::string body;
};

// GET http://127.0.0.1:PORT/TARGET (target includes the leading '/'); bounded by `timeout`.
http_response http_get(unsigned short port, const std::string& target,
                       std::chrono::milliseconds timeout = std::chrono::seconds(5));

}  // namespace gatewayd::test
