#include "metrics/process_collector.hpp"

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "metrics/family_builder.hpp"

namespace gatewayd::metrics {
namespace {

double number(const std::string& text) {
  return std::strtod(text.c_str(), nullptr);  // 0 for text that is not a number
}

// Wall-clock time of boot, from the clocks rather than /proc/stat's btime: /proc/stat is
// hidden under the unit's ProcSubset=pid, /proc/self/stat is not.
double boot_time_seconds() {
  timespec real{}, boot{};
  clock_gettime(CLOCK_REALTIME, &real);
  clock_gettime(CLOCK_BOOTTIME, &boot);
  return static_cast<double>(real.tv_sec - boot.tv_sec) +
         static_cast<double>(real.tv_nsec - boot.tv_nsec) / 1e9;
}

}  // namespace

std::vector<prometheus::MetricFamily> process_collector::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));

  // A scrape must never throw into the HTTP server's thread: unreadable /proc values leave
  // their families out instead.
  std::ifstream stat_file("/proc/self/stat");
  std::string stat;
  std::getline(stat_file, stat);
  const auto paren = stat.rfind(')');
  // Fields after the parenthesised command name, which may itself contain spaces.
  std::istringstream fields(paren == std::string::npos ? std::string() : stat.substr(paren + 1));
  std::string v[22];
  for (auto& f : v)
    fields >> f;
  // v[0] is field 3 (state): utime=14, stime=15, starttime=22, vsize=23, rss=24.
  if (fields) {
    const double utime = number(v[11]), stime = number(v[12]);
    const double start = number(v[19]) / ticks + boot_time_seconds();

    out.push_back(family_of_one("process_cpu_seconds_total",
                                "Total user and system CPU time spent in seconds.",
                                MetricType::Counter, (utime + stime) / ticks));
    out.push_back(family_of_one("process_resident_memory_bytes", "Resident memory size in bytes.",
                                MetricType::Gauge, number(v[21]) * page));
    out.push_back(family_of_one("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                                MetricType::Gauge, number(v[20])));
    out.push_back(family_of_one("process_start_time_seconds",
                                "Start time of the process since unix epoch in seconds.",
                                MetricType::Gauge, start));
  }

  std::error_code ec;
  std::size_t fds = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++fds;
  out.push_back(family_of_one("process_open_fds", "Number of open file descriptors.",
                              MetricType::Gauge, static_cast<double>(fds)));
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  out.push_back(family_of_one("process_max_fds", "Maximum number of open file descriptors.",
                              MetricType::Gauge, static_cast<double>(lim.rlim_cur)));
  return out;
}

}  // namespace gatewayd::metrics
