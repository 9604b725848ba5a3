#include "metrics/process_collector.hpp"

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "metrics/family_builder.hpp"

namespace gatewayd::metrics {
namespace {

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

  std::ifstream stat_file("/proc/self/stat");
  std::string stat;
  std::getline(stat_file, stat);
  // Fields after the parenthesised command name, which may itself contain spaces.
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string v[24];
  for (auto& f : v)
    fields >> f;
  // v[0] is field 3 (state): utime=14, stime=15, starttime=22, vsize=23, rss=24.
  const double utime = std::stod(v[11]), stime = std::stod(v[12]);
  const double start = std::stod(v[19]) / ticks + boot_time_seconds();

  auto cpu = family("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
                    MetricType::Counter);
  add_sample(cpu, (utime + stime) / ticks);
  out.push_back(std::move(cpu));
  auto rss =
      family("process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::Gauge);
  add_sample(rss, std::stod(v[21]) * page);
  out.push_back(std::move(rss));
  auto vm =
      family("process_virtual_memory_bytes", "Virtual memory size in bytes.", MetricType::Gauge);
  add_sample(vm, std::stod(v[20]));
  out.push_back(std::move(vm));
  auto st = family("process_start_time_seconds",
                   "Start time of the process since unix epoch in seconds.", MetricType::Gauge);
  add_sample(st, start);
  out.push_back(std::move(st));

  std::error_code ec;
  std::size_t fds = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++fds;
  auto open = family("process_open_fds", "Number of open file descriptors.", MetricType::Gauge);
  add_sample(open, static_cast<double>(fds));
  out.push_back(std::move(open));
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  auto max =
      family("process_max_fds", "Maximum number of open file descriptors.", MetricType::Gauge);
  add_sample(max, static_cast<double>(lim.rlim_cur));
  out.push_back(std::move(max));
  return out;
}

}  // namespace gatewayd::metrics
