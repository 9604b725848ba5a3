#include "runtime/log.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

namespace gatewayd::log {
namespace {

std::atomic<int> current_level{static_cast<int>(level::info)};

// journald sets JOURNAL_STREAM for services whose stderr it captures; it stamps each line
// itself, so a timestamp of ours would only be noise there.
bool under_journald() noexcept {
  static const bool value = std::getenv("JOURNAL_STREAM") != nullptr;
  return value;
}

}  // namespace

void set_level(level l) noexcept {
  current_level.store(static_cast<int>(l));
}

bool enabled(level l) noexcept {
  return static_cast<int>(l) <= current_level.load(std::memory_order_relaxed);
}

std::string_view to_string(level l) noexcept {
  switch (l) {
    case level::error:
      return "error";
    case level::warning:
      return "warning";
    case level::info:
      return "info";
    case level::debug:
      return "debug";
  }
  return "info";
}

bool parse_level(std::string_view name, level& out) noexcept {
  for (level l : {level::error, level::warning, level::info, level::debug}) {
    if (name == to_string(l)) {
      out = l;
      return true;
    }
  }
  return false;
}

void write(level l, std::string_view message) noexcept {
  try {
    std::string text;
    text.reserve(message.size() + 48);
    if (under_journald()) {
      text += '<';
      text += char('0' + static_cast<int>(l));
      text += '>';
    } else {
      const auto now = std::chrono::system_clock::now();
      const std::time_t secs = std::chrono::system_clock::to_time_t(now);
      const auto ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() %
          1000;
      std::tm tm{};
      gmtime_r(&secs, &tm);
      char stamp[64];
      std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ ", tm.tm_year + 1900,
                    tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, int(ms));
      text += stamp;
      text += to_string(l);
      text += ' ';
    }
    text += message;
    text += '\n';
    // One write per line: lines from different threads never interleave.
    std::size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(STDERR_FILENO, text.data() + done, text.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
  } catch (...) {
    // Logging must never take the gateway down.
  }
}

std::string escaped(std::string_view text) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7f && c != '"' && c != '\\') {
      out += c;
    } else {
      out += "\\x";
      out += hex[b >> 4];
      out += hex[b & 0xf];
    }
  }
  return out;
}

}  // namespace gatewayd::log
