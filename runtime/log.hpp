// Line-oriented logging to stderr: one write(2) per line, journald priority prefixes under
// systemd, timestamps only when nobody else adds them.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

namespace gatewayd::log {

// Values are the syslog priorities journald understands as "<N>" prefixes.
enum class level : int { error = 3, warning = 4, info = 6, debug = 7 };

void set_level(level l) noexcept;
bool enabled(level l) noexcept;
// "debug", "info", "warning", "error".
std::string_view to_string(level l) noexcept;
// Parses "debug", "info", "warning", "error"; false when unknown.
bool parse_level(std::string_view name, level& out) noexcept;
// Writes one whole line (no newline needed) atomically with respect to other lines.
void write(level l, std::string_view message) noexcept;
// Text a peer chose (a certificate's name), safe to put in a line between quotes: bytes outside
// printable ASCII, '"' and the backslash become \xNN: a name cannot forge a line or a quote.
std::string escaped(std::string_view text);

// Collects one line with operator<< and writes it when it goes out of scope; a line of a
// rate-limited kind (log_limit.hpp) ends with how many of its kind were held back before it.
class line {
 public:
  explicit line(level l, std::uint64_t suppressed_before = 0)
      : level_(l), suppressed_before_(suppressed_before) {}
  line(const line&) = delete;
  line& operator=(const line&) = delete;
  ~line() {
    if (suppressed_before_) out_ << " (" << suppressed_before_ << " more suppressed)";
    write(level_, out_.str());
  }
  template <class T>
  line& operator<<(const T& v) {
    out_ << v;
    return *this;
  }

 private:
  level level_;
  std::uint64_t suppressed_before_;
  std::ostringstream out_;
};

}  // namespace gatewayd::log

// GW_LOG(info) << "listening on " << endpoint;  — costs one branch when the level is off.
#define GW_LOG(lvl)                                             \
  if (!::gatewayd::log::enabled(::gatewayd::log::level::lvl)) { \
  } else                                                        \
    ::gatewayd::log::line(::gatewayd::log::level::lvl)

// Every file that logs can also rate-limit a line (GW_LOG_LIMITED) with this one include.
#include "runtime/log_limit.hpp"  // IWYU pragma: export
