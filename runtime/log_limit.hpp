// Rate-limited log lines: at most one line a second per kind, and a count of what was held
// back, so a flood of bad peers cannot flood the journal and hide what an operator needs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string_view>

#include "runtime/log.hpp"

namespace gatewayd::log {

// The decision for one kind of line. Pure (the caller passes the time), lock-free, and shared
// by every thread that logs that kind. Each suppressed line is counted once: either on the
// next line written ("(N more suppressed)") or by take_expired() once its second is over.
class rate_limit {
 public:
  using clock = std::chrono::steady_clock;

  explicit rate_limit(clock::duration period = std::chrono::seconds(1)) noexcept
      : period_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(period).count()) {}

  struct verdict {
    bool write = false;
    std::uint64_t suppressed = 0;  // lines held back since the previous one written
  };
  verdict admit(clock::time_point now) noexcept;
  // What was suppressed in a period that has ended and not yet been reported; 0 otherwise.
  std::uint64_t take_expired(clock::time_point now) noexcept;

 private:
  std::int64_t period_ns_;
  std::atomic<std::int64_t> next_ns_{INT64_MIN};  // no line before this time
  std::atomic<std::uint64_t> suppressed_{0};
};

// One call site's limit, named for the summary line ("<kind>: N more suppressed"). Sites
// link themselves into a process-wide list on first use so flush_suppressed() can report a
// flood that has stopped; they are never unlinked, so they must live forever (the macro below
// makes them function-local statics, trivially destructible).
class limited_site {
 public:
  limited_site(level l, std::string_view kind) noexcept;

  level severity() const noexcept { return level_; }
  std::string_view kind() const noexcept { return kind_; }
  rate_limit& limit() noexcept { return limit_; }
  limited_site* next() const noexcept { return next_; }

 private:
  rate_limit limit_;
  level level_;
  std::string_view kind_;
  limited_site* next_ = nullptr;
};

// Writes "<kind>: N more suppressed" for every site whose last period ended with lines held
// back. The gateway calls it once a second (log_flusher); tests may call it with their time.
void flush_suppressed(rate_limit::clock::time_point now = rate_limit::clock::now()) noexcept;

}  // namespace gatewayd::log

// GW_LOG_LIMITED_BY(warning, failure_log_) << "consumer " << name << ...;
// As GW_LOG_LIMITED, with a limit the caller owns (one per consumer, say): one source's lines
// then never hold back another's. What it holds back is told on its next line written only
// (flush_suppressed does not know the limit).
#define GW_LOG_LIMITED_BY(lvl, limit)                                      \
  if (!::gatewayd::log::enabled(::gatewayd::log::level::lvl)) {            \
  } else if (const auto gw_log_verdict_ =                                  \
                 (limit).admit(::gatewayd::log::rate_limit::clock::now()); \
             !gw_log_verdict_.write) {                                     \
  } else                                                                   \
    ::gatewayd::log::line(::gatewayd::log::level::lvl, gw_log_verdict_.suppressed)

// GW_LOG_LIMITED(warning, "supplier protocol errors") << "supplier " << peer << ...;
// As GW_LOG, but this line is written at most once a second; the one written after a pause
// ends with "(N more suppressed)". Nothing is formatted for a suppressed line.
// (The site is made once, at the line's first pass, and linked for flush_suppressed.)
#define GW_LOG_LIMITED(lvl, kind)                                                           \
  if (static ::gatewayd::log::limited_site gw_log_site_(::gatewayd::log::level::lvl, kind); \
      false) {                                                                              \
  } else                                                                                    \
    GW_LOG_LIMITED_BY(lvl, gw_log_site_.limit())
