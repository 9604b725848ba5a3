#include "gateway/config_watcher.hpp"

#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "runtime/log.hpp"

namespace gatewayd::gateway {
namespace {

// Only a file that is whole: a write that finished (close after writing), a rename into place
// (editors, `mv`), or `touch`. IN_MODIFY and IN_CREATE fire while a writer is still halfway
// through, and a half-written routes file can be valid TOML that routes nothing (an empty
// file removes every consumer): the reload storm test lost frames that way.
constexpr std::uint32_t watched_events = IN_CLOSE_WRITE | IN_MOVED_TO | IN_ATTRIB;

int open_inotify() {
  const int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "inotify_init1");
  return fd;
}

}  // namespace

config_watcher::config_watcher(const runtime::executor& ex, on_change changed,
                               std::chrono::milliseconds quiet)
    : strand_(runtime::make_strand(ex)),
      inotify_(strand_, open_inotify()),
      debounce_(strand_),
      changed_(std::move(changed)),
      quiet_(quiet) {}

config_watcher::~config_watcher() = default;

void config_watcher::watch(const std::vector<std::filesystem::path>& files) {
  asio::post(strand_, [this, files] {
    if (stopped_) return;
    for (const auto& [wd, names] : names_)
      ::inotify_rm_watch(inotify_.native_handle(), wd);
    names_.clear();
    for (const auto& file : files) {
      const auto dir = file.parent_path().empty() ? std::filesystem::path(".") : file.parent_path();
      const int wd =
          ::inotify_add_watch(inotify_.native_handle(), dir.c_str(), watched_events | IN_ONLYDIR);
      if (wd < 0) {
        GW_LOG(warning) << "cannot watch " << dir.string()
                        << " for changes: " << std::generic_category().message(errno)
                        << " (reload with SIGHUP instead)";
        continue;
      }
      // inotify hands back the same descriptor for a directory watched twice.
      names_[wd].insert(file.filename().string());
    }
    if (!waiting_) do_wait();
  });
}

void config_watcher::stop() {
  asio::post(strand_, [this] {
    stopped_ = true;
    std::error_code ignored;
    debounce_.cancel();
    inotify_.close(ignored);
  });
}

void config_watcher::do_wait() {
  waiting_ = true;
  inotify_.async_wait(asio::posix::stream_descriptor::wait_read,
                      [this](std::error_code ec) { on_readable(ec); });
}

void config_watcher::on_readable(std::error_code ec) {
  waiting_ = false;
  if (ec || stopped_) return;
  bool relevant = false;
  alignas(inotify_event) char buffer[8192];
  for (;;) {
    const ssize_t n = ::read(inotify_.native_handle(), buffer, sizeof buffer);
    if (n <= 0) break;  // EAGAIN: drained
    for (ssize_t at = 0; at < n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
      at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      if (event->mask & IN_Q_OVERFLOW) relevant = true;  // events lost: assume ours was one
      if (event->len == 0) continue;
      const auto it = names_.find(event->wd);
      if (it != names_.end() && it->second.count(event->name)) relevant = true;
    }
  }
  if (relevant) {
    // Every event restarts the quiet period: one reload per save, after the last write.
    debounce_.expires_after(quiet_);
    debounce_.async_wait([this](std::error_code e) { on_quiet(e); });
  }
  do_wait();
}

void config_watcher::on_quiet(std::error_code ec) {
  if (ec || stopped_) return;
  changed_();
}

}  // namespace gatewayd::gateway
