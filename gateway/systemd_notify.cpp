#include "gateway/systemd_notify.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <ctime>

#include "runtime/log.hpp"

namespace gatewayd::gateway {
namespace {

// STATUS= is one line: a newline would start a new assignment in the datagram.
std::string status_line(std::string_view status) {
  std::string s = "STATUS=";
  for (char c : status)
    s += (c == '\n' ? ' ' : c);
  return s;
}

std::uint64_t monotonic_usec() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000u +
         static_cast<std::uint64_t>(ts.tv_nsec) / 1000u;
}

std::string_view notify_address() noexcept {
  const char* address = std::getenv("NOTIFY_SOCKET");
  return address ? address : "";
}

// A whole decimal number, or nothing.
bool parse_unsigned(const char* text, unsigned long long& out) noexcept {
  if (!text || *text < '0' || *text > '9') return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtoull(text, &end, 10);
  return errno == 0 && *end == '\0';
}

// What sd_watchdog_enabled(3) reads: WATCHDOG_USEC, meant for this process unless WATCHDOG_PID
// names another (a child that inherited the environment must not ping in our name). Not unset:
// the tests' and systemd's WATCHDOG_PID checks stay valid.
std::chrono::microseconds watchdog_from_environment() noexcept {
  unsigned long long usec = 0;
  if (!parse_unsigned(std::getenv("WATCHDOG_USEC"), usec) || usec == 0) return {};
  if (const char* pid = std::getenv("WATCHDOG_PID"); pid && *pid) {
    unsigned long long p = 0;
    if (!parse_unsigned(pid, p) || p != static_cast<unsigned long long>(::getpid())) return {};
  }
  return std::chrono::microseconds(usec);
}

// Once a second at most, whichever message found the socket full: an operator reading the
// journal learns that PID 1 is behind, and that nothing here waits for it.
void report_full() noexcept {
  GW_LOG_LIMITED(warning, "systemd notify socket full")
      << "systemd's notify socket is full (PID 1 is not reading it): READY/RELOADING/STOPPING "
         "are kept in order and retried every "
      << systemd_notify::retry_period.count() << " ms, watchdog pings dropped until it reads again";
}

}  // namespace

systemd_notify::systemd_notify(const runtime::executor& ex)
    : socket_(notify_address()), watchdog_timeout_(watchdog_from_environment()), retry_(ex) {
  if (!socket_.problem().empty()) {
    GW_LOG(warning) << socket_.problem() << "; systemd will not hear from gatewayd";
  }
}

systemd_notify::~systemd_notify() {
  std::lock_guard lock(mutex_);
  retry_state_ = retry_state::stopped;
  retry_.cancel();
}

void systemd_notify::ready(std::string_view status) noexcept {
  try {
    queue(notify_backlog::kind::ready, "READY=1\n" + status_line(status));
  } catch (...) {
  }
}

void systemd_notify::reloading(std::string_view status) noexcept {
  try {
    std::string s = "RELOADING=1\nMONOTONIC_USEC=";
    s += std::to_string(monotonic_usec());
    s += '\n';
    s += status_line(status);
    queue(notify_backlog::kind::reloading, std::move(s));
  } catch (...) {
  }
}

void systemd_notify::stopping(std::string_view status) noexcept {
  try {
    queue(notify_backlog::kind::stopping, "STOPPING=1\n" + status_line(status));
  } catch (...) {
  }
}

void systemd_notify::status(std::string_view status) noexcept {
  try {
    queue(notify_backlog::kind::status, status_line(status));
  } catch (...) {
  }
}

void systemd_notify::watchdog() noexcept {
  if (!enabled()) return;
  notify_socket::result failure{notify_socket::outcome::sent, 0};
  bool full = false;
  {
    std::lock_guard lock(mutex_);
    // Whatever waits goes first; a socket that cannot take it cannot take the ping either.
    full = !flush_locked(failure);
    if (!full) {
      const auto r = socket_.send("WATCHDOG=1");
      full = r.what == notify_socket::outcome::full;
      if (r.what == notify_socket::outcome::failed) failure = r;
    }
    if (full) ++watchdog_dropped_;  // the next tick sends one
  }
  if (full) report_full();
  report_failure(failure);
}

void systemd_notify::queue(notify_backlog::kind what, std::string text) noexcept {
  if (!enabled()) return;
  notify_socket::result failure{notify_socket::outcome::sent, 0};
  std::size_t folded = 0;
  bool waits = false;
  try {
    std::lock_guard lock(mutex_);
    // Behind whatever already waits: a state message never overtakes an earlier one.
    folded = backlog_.push({what, std::move(text)});
    waits = !flush_locked(failure);
    if (waits && retry_state_ == retry_state::stopped) {
      backlog_.clear();  // the stop is over: nobody will retry
    } else if (waits) {
      arm_retry_locked();
    }
  } catch (...) {
  }
  if (waits) report_full();
  if (folded) {
    GW_LOG_LIMITED(warning, "systemd notifications folded")
        << "systemd's notify socket stays full: " << folded
        << " state message(s) superseded by later ones folded away";
  }
  report_failure(failure);
}

bool systemd_notify::flush_locked(notify_socket::result& failure) noexcept {
  while (!backlog_.empty()) {
    const auto r = socket_.send(backlog_.front().text);
    if (r.what == notify_socket::outcome::full) return false;
    // A failure other than a full socket (no reader at that address, ...) would fail again:
    // the message is dropped and reported, as sd_notify's caller would.
    if (r.what == notify_socket::outcome::failed) failure = r;
    backlog_.pop_front();
  }
  return true;
}

void systemd_notify::arm_retry_locked() {
  if (retry_state_ != retry_state::idle) return;
  retry_state_ = retry_state::armed;
  retry_.expires_after(retry_period);
  retry_.async_wait([this](std::error_code ec) { on_retry(ec); });
}

void systemd_notify::on_retry(std::error_code ec) noexcept {
  if (ec) return;  // cancelled by stop()
  notify_socket::result failure{notify_socket::outcome::sent, 0};
  {
    std::lock_guard lock(mutex_);
    if (retry_state_ != retry_state::armed) return;
    retry_state_ = retry_state::idle;
    if (!flush_locked(failure)) arm_retry_locked();
  }
  report_failure(failure);
}

void systemd_notify::stop() noexcept {
  notify_socket::result failure{notify_socket::outcome::sent, 0};
  std::size_t given_up = 0;
  {
    std::lock_guard lock(mutex_);
    flush_locked(failure);
    retry_state_ = retry_state::stopped;
    retry_.cancel();
    given_up = backlog_.size();
    backlog_.clear();
  }
  if (given_up) {
    GW_LOG(warning) << given_up
                    << " message(s) for systemd never sent: its notify socket stayed full to the "
                       "end (systemd sees the exit itself)";
  }
  report_failure(failure);
}

std::size_t systemd_notify::pending() const {
  std::lock_guard lock(mutex_);
  return backlog_.size();
}

std::uint64_t systemd_notify::watchdog_dropped() const {
  std::lock_guard lock(mutex_);
  return watchdog_dropped_;
}

void systemd_notify::report_failure(const notify_socket::result& r) const noexcept {
  if (r.what != notify_socket::outcome::failed) return;
  GW_LOG_LIMITED(warning, "systemd notify failures")
      << "cannot notify systemd at NOTIFY_SOCKET: "
      << std::error_code(r.error, std::generic_category()).message() << "; the message is dropped";
}

}  // namespace gatewayd::gateway
