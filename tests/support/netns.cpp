#include "tests/support/netns.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace gatewayd::test {

namespace {

const std::string ip_binary = "/usr/sbin/ip";    // Debian package iproute2
const std::string nft_binary = "/usr/sbin/nft";  // Debian package nftables
const std::string prefix = "gwf-";
constexpr int max_hosts = 4;  // the /30s one PID's 16 addresses hold

std::mutex slots_mutex;
int slots_used = 0;  // bit N: gwf-PID-N exists
bool swept = false;

std::string dotted(std::uint32_t a) {
  return std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 255) + "." +
         std::to_string((a >> 8) & 255) + "." + std::to_string(a & 255);
}

command_result ip(const std::vector<std::string>& args) {
  return run_command(ip_binary, args, std::chrono::seconds(10));
}

void must(const command_result& r, const std::string& what) {
  if (r.exit_code != 0) throw std::runtime_error(what + " failed: " + r.err + r.out);
}

// Namespaces of test processes that ended without deleting theirs (a crash, a SIGKILL from
// ctest's timeout), and any of ours a dead process with our PID left.
void sweep_stale() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/run/netns", ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind(prefix, 0) != 0) continue;
    const auto dash = n.find('-', prefix.size());
    if (dash == std::string::npos) continue;
    const pid_t pid =
        static_cast<pid_t>(std::atol(n.substr(prefix.size(), dash - prefix.size()).c_str()));
    if (pid <= 0) continue;
    if (pid == ::getpid() || (::kill(pid, 0) == -1 && errno == ESRCH)) ip({"netns", "del", n});
  }
}

}  // namespace

const std::string& netns_unavailable() {
  static const std::string why = []() -> std::string {
    for (const auto& b : {ip_binary, nft_binary})
      if (::access(b.c_str(), X_OK) != 0) return b + " is missing (scripts/setup installs it)";
    // A child that unshares a network namespace and lists its (empty) ruleset: CAP_SYS_ADMIN,
    // CAP_NET_ADMIN and the kernel's nftables, all at once.
    const pid_t child = ::fork();
    if (child == 0) {
      if (::unshare(CLONE_NEWNET) != 0) ::_exit(2);
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 1);
      ::dup2(null, 2);
      ::execl(nft_binary.c_str(), "nft", "list", "ruleset", static_cast<char*>(nullptr));
      ::_exit(3);
    }
    int status = 0;
    if (child < 0 || ::waitpid(child, &status, 0) != child) return "cannot fork a probe";
    if (!WIFEXITED(status) || WEXITSTATUS(status) == 2)
      return "cannot make a network namespace (needs root or CAP_SYS_ADMIN)";
    if (WEXITSTATUS(status) != 0) return "nft cannot list a namespace's ruleset (no nftables)";
    return "";
  }();
  return why;
}

boost::test_tools::assertion_result namespaces_available(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result r(netns_unavailable().empty());
  r.message() << "network namespaces unavailable: " << netns_unavailable();
  if (!r) std::cout << "SKIPPED: network namespaces unavailable: " << netns_unavailable() << "\n";
  return r;
}

netns_host::netns_host() {
  {
    std::lock_guard lock(slots_mutex);
    if (!swept) {
      sweep_stale();
      swept = true;
    }
    while (index_ < max_hosts && (slots_used & (1 << index_)))
      ++index_;
    if (index_ == max_hosts) throw std::runtime_error("more than 4 namespaces in one test");
    slots_used |= 1 << index_;
  }
  const auto pid = std::to_string(::getpid());
  name_ = prefix + pid + "-" + std::to_string(index_);
  outer_if_ = "gwf" + pid + "o" + std::to_string(index_);  // at most 15 characters
  inner_if_ = "gwf" + pid + "i" + std::to_string(index_);
  const std::uint32_t base = (10u << 24) |
                             ((static_cast<std::uint32_t>(::getpid()) % (1u << 20)) * 16u) |
                             static_cast<std::uint32_t>(index_) * 4u;
  outer_addr_ = dotted(base + 1);
  inner_addr_ = dotted(base + 2);
  ip({"link", "del", outer_if_});  // left by a start that failed half-way, if any
  // A host whose own networks lie in 10/8 must not lose a route to a test's /30: refuse rather
  // than shadow it (only the default route may cover the address).
  const auto routes = ip({"-4", "route", "show", "match", outer_addr_});
  std::string covering;
  std::istringstream lines(routes.out);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line.rfind("default", 0) != 0) covering += line + "; ";
  if (!covering.empty()) {
    std::lock_guard lock(slots_mutex);
    slots_used &= ~(1 << index_);
    throw std::runtime_error("the test address " + outer_addr_ +
                             " is on a network of this host already: " + covering);
  }
  try {
    must(ip({"netns", "add", name_}), "ip netns add " + name_);
    must(ip({"link", "add", outer_if_, "type", "veth", "peer", "name", inner_if_, "netns", name_}),
         "ip link add veth");
    must(ip({"addr", "add", outer_addr_ + "/30", "dev", outer_if_}), "ip addr add");
    must(ip({"link", "set", outer_if_, "up"}), "ip link set up");
    must(ip({"-n", name_, "addr", "add", inner_addr_ + "/30", "dev", inner_if_}), "ip addr add");
    must(ip({"-n", name_, "link", "set", inner_if_, "up"}), "ip link set up");
    must(ip({"-n", name_, "link", "set", "lo", "up"}), "ip link set lo up");
  } catch (...) {
    ip({"netns", "del", name_});
    ip({"link", "del", outer_if_});
    std::lock_guard lock(slots_mutex);
    slots_used &= ~(1 << index_);
    throw;
  }
}

netns_host::~netns_host() {
  processes_.clear();  // each SIGKILLed and reaped by its PID
  ip({"netns", "del", name_});
  ip({"link", "del", outer_if_});  // gone with its peer already, unless the move failed
  std::lock_guard lock(slots_mutex);
  slots_used &= ~(1 << index_);
}

void netns_host::run(const std::function<void()>& f) const {
  std::exception_ptr error;
  std::thread t([&] {
    try {
      const int fd = ::open(("/run/netns/" + name_).c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) throw std::system_error(errno, std::generic_category(), "open " + name_);
      // Network namespaces are per thread: this one joins, the test's other threads stay.
      const int rc = ::setns(fd, CLONE_NEWNET);
      const int err = errno;
      ::close(fd);
      if (rc != 0) throw std::system_error(err, std::generic_category(), "setns " + name_);
      f();
    } catch (...) {
      error = std::current_exception();
    }
  });
  t.join();
  if (error) std::rethrow_exception(error);
}

daemon_process& netns_host::start(const std::string& binary, const std::vector<std::string>& args,
                                  const std::filesystem::path& log) {
  std::vector<std::string> all{"netns", "exec", name_, binary};
  all.insert(all.end(), args.begin(), args.end());
  processes_.push_back(std::make_unique<daemon_process>(ip_binary, all, log));
  return *processes_.back();
}

void netns_host::apply(const std::string& input_rules, const std::string& output_rules) {
  // Declaring the table first makes the delete succeed whether or not a fault was on.
  std::string text = "table inet gwfault\ndelete table inet gwfault\n";
  if (!input_rules.empty() || !output_rules.empty()) {
    text +=
        "table inet gwfault {\n"
        "  chain input {\n    type filter hook input priority 0; policy accept;\n    " +
        input_rules +
        "\n  }\n"
        "  chain output {\n    type filter hook output priority 0; policy accept;\n    " +
        output_rules + "\n  }\n}\n";
  }
  const auto file = dir_.write("rules.nft", text);
  must(ip({"netns", "exec", name_, nft_binary, "-f", file.string()}), "nft -f (" + text + ")");
}

void netns_host::partition() {
  apply("iifname \"" + inner_if_ + "\" drop", "oifname \"" + inner_if_ + "\" drop");
}

void netns_host::drop_input(unsigned short port) {
  apply("iifname \"" + inner_if_ + "\" " + (port ? "tcp dport " + std::to_string(port) + " " : "") +
            "drop",
        "");
}

void netns_host::drop_output(unsigned short port) {
  apply("", "oifname \"" + inner_if_ + "\" " +
                (port ? "tcp sport " + std::to_string(port) + " " : "") + "drop");
}

void netns_host::partition_from(const std::vector<unsigned short>& remote_ports) {
  std::string set = "{ ";
  for (std::size_t i = 0; i < remote_ports.size(); ++i)
    set += (i ? ", " : "") + std::to_string(remote_ports[i]);
  set += " }";
  apply("iifname \"" + inner_if_ + "\" tcp sport " + set + " drop",
        "oifname \"" + inner_if_ + "\" tcp dport " + set + " drop");
}

void netns_host::drop_syn(unsigned short port) {
  apply("iifname \"" + inner_if_ + "\" tcp dport " + std::to_string(port) +
            " tcp flags & (syn | ack) == syn drop",
        "");
}

void netns_host::drop_random(int percent) {
  const std::string rule = " numgen random mod 100 < " + std::to_string(percent) + " drop";
  apply("iifname \"" + inner_if_ + "\"" + rule, "oifname \"" + inner_if_ + "\"" + rule);
}

void netns_host::heal() {
  apply("", "");
}

}  // namespace gatewayd::test
