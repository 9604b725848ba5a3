// The log rate limit, driven by a clock the test moves: one line a period, every suppressed
// line counted exactly once (on the next line or by the flush), also under two threads.
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "runtime/log.hpp"

using gatewayd::log::rate_limit;
using namespace std::chrono_literals;

namespace {

const rate_limit::clock::time_point t0 = rate_limit::clock::time_point{} + 1000s;

// Captures what the log writes to stderr while it lives.
class captured_stderr {
 public:
  captured_stderr() : file_(std::tmpfile()), saved_(::dup(STDERR_FILENO)) {
    ::dup2(::fileno(file_), STDERR_FILENO);
  }
  ~captured_stderr() {
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    std::fclose(file_);
  }
  std::string text() const {
    std::string out;
    std::rewind(file_);
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, file_)) > 0;)
      out.append(buf, n);
    return out;
  }

 private:
  std::FILE* file_;
  int saved_;
};

}  // namespace

BOOST_AUTO_TEST_CASE(one_line_a_period_then_the_count_of_what_was_held_back) {
  rate_limit limit(1s);
  auto first = limit.admit(t0);
  BOOST_TEST(first.write);
  BOOST_TEST(first.suppressed == 0u);
  for (int i = 0; i < 999; ++i)
    BOOST_TEST(!limit.admit(t0 + 1ms * i).write);
  // Not yet a second after the line: nothing to report, nothing written.
  BOOST_TEST(limit.take_expired(t0 + 999ms) == 0u);
  BOOST_TEST(!limit.admit(t0 + 999ms).write);
  // A second later the next line carries the count of the 1,000 held back.
  const auto next = limit.admit(t0 + 1s);
  BOOST_TEST(next.write);
  BOOST_TEST(next.suppressed == 1000u);
  BOOST_TEST(!limit.admit(t0 + 1500ms).write);
  BOOST_TEST(limit.admit(t0 + 2s).suppressed == 1u);
}

BOOST_AUTO_TEST_CASE(a_flood_that_stops_is_reported_once_its_period_is_over) {
  rate_limit limit(1s);
  BOOST_TEST(limit.admit(t0).write);
  for (int i = 0; i < 42; ++i)
    limit.admit(t0 + 10ms);
  BOOST_TEST(limit.take_expired(t0 + 500ms) == 0u);
  BOOST_TEST(limit.take_expired(t0 + 1s) == 42u);
  BOOST_TEST(limit.take_expired(t0 + 5s) == 0u);  // reported once
  // The next line after a quiet spell carries no count: it was already reported.
  const auto later = limit.admit(t0 + 10s);
  BOOST_TEST(later.write);
  BOOST_TEST(later.suppressed == 0u);
}

BOOST_AUTO_TEST_CASE(two_threads_flooding_one_kind_lose_no_count) {
  rate_limit limit(1s);
  std::atomic<std::uint64_t> written{0}, reported{0};
  std::atomic<int> step{0};
  constexpr int per_thread = 200000;
  // Both threads walk the same clock through 10 periods, so lines are due while both contend.
  auto flood = [&] {
    for (int i = 0; i < per_thread; ++i) {
      const auto now = t0 + 50us * step.fetch_add(1);
      const auto v = limit.admit(now);
      written += v.write;
      reported += v.suppressed;
    }
  };
  std::thread a(flood), b(flood);
  a.join();
  b.join();
  reported += limit.take_expired(rate_limit::clock::time_point::max());
  BOOST_TEST(written.load() + reported.load() == 2u * per_thread);
  // 400,000 steps of 50 us: 20 s of clock, so one line per period, 20 at most (a thread that
  // lost the processor between reading the clock and admitting can push a period back a
  // little, never add one).
  BOOST_TEST(written.load() <= 20u);
  BOOST_TEST(written.load() >= 18u);
}

BOOST_AUTO_TEST_CASE(the_macro_writes_one_line_and_the_flush_writes_the_count) {
  captured_stderr err;
  for (int i = 0; i < 500; ++i)
    GW_LOG_LIMITED(warning, "test floods") << "flood line " << i;
  gatewayd::log::flush_suppressed(rate_limit::clock::time_point::max());
  const std::string text = err.text();
  BOOST_TEST(text.find("flood line 0") != std::string::npos, text);
  BOOST_TEST(text.find("flood line 1") == std::string::npos, text);
  BOOST_TEST(text.find("test floods: 499 more suppressed") != std::string::npos, text);
  std::istringstream lines(text);
  int n = 0;
  for (std::string line; std::getline(lines, line);)
    ++n;
  BOOST_TEST(n == 2);
}
