// A tiny blocking HTTP/1.0 GET over loopback for tests: scrapes /metrics and queries
// Prometheus's API without pulling in an HTTP client library.
#pragma once

#include <chrono>
#include <string>
#include <system_error>

namespace gatewayd::test {

struct http_response {
  int status = 0;  // 0 when the connection failed or the reply was not HTTP
  std::string body;
};

// GET http://127.0.0.1:PORT/TARGET (target includes the leading '/'); bounded by `timeout`.
// `source`: the client's own address (any of 127/8 reaches 127.0.0.1 on Linux); empty = the
// kernel's choice.
http_response http_get(unsigned short port, const std::string& target,
                       std::chrono::milliseconds timeout = std::chrono::seconds(5),
                       const std::string& source = "");

// What a client bound to `source` got for sending `request` (raw bytes, maybe none) to
// 127.0.0.1:PORT: whether it connected, every byte it read, and how the reading ended
// (asio::error::eof: the server closed in order; connection_reset; timed_out after `timeout`).
struct raw_exchange {
  bool connected = false;
  std::string reply;
  std::error_code end;
};
raw_exchange http_exchange(unsigned short port, const std::string& request,
                           const std::string& source = "",
                           std::chrono::milliseconds timeout = std::chrono::seconds(5));

}  // namespace gatewayd::test
