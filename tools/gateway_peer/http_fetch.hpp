// A blocking HTTP/1.0 GET with a deadline, for `gateway-peer top`'s reads of /metrics, /connz and
// /routez on the gateway's metrics listener (a literal address; no TLS, no redirects).
#pragma once

#include <chrono>
#include <string>

#include "net/endpoint.hpp"

namespace gatewayd::tools {

struct http_reply {
  int status = 0;     // 0: no HTTP answer (see `error`)
  std::string body;   // the bytes after the headers
  std::string error;  // why there is no answer: "connection refused", "timed out", ...
};

// GET http://AT/TARGET; the whole exchange (connect, send, read to the server's close) is
// bounded by `timeout`.
http_reply http_fetch(const net::endpoint& at, const std::string& target,
                      std::chrono::milliseconds timeout);

}  // namespace gatewayd::tools
