// `gatewayd --ports-file FILE`: the addresses the listeners got, written atomically once they
// are bound, so tests and scripts find the ports without reading the log (nats-server's idea).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "net/endpoint.hpp"

namespace gatewayd::gateway {

struct bound_ports {
  pid_t pid = 0;  // tells a file left by an earlier (killed) process from this one's
  net::endpoint supplier;
  std::optional<net::endpoint> metrics;  // none when metrics are disabled
};

// {"pid": 123, "supplier": "127.0.0.1:40123", "metrics": "127.0.0.1:40124"} (metrics: null
// when disabled), one line.
std::string to_json(const bound_ports& ports);

// Writes `content` to a temporary file beside `path`, then renames it over `path`: a reader
// sees the old file, or none, or all of the new one.
std::error_code write_atomically(const std::filesystem::path& path, std::string_view content);

// Writes the file on construction (throws std::system_error naming the path when it cannot)
// and removes it on destruction, when the daemon exits.
class ports_file {
 public:
  ports_file(std::filesystem::path path, const bound_ports& ports);
  ~ports_file();
  ports_file(const ports_file&) = delete;
  ports_file& operator=(const ports_file&) = delete;

 private:
  std::filesystem::path path_;
};

}  // namespace gatewayd::gateway
