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

std::filesystem::path directory_of(const std::filesystem::path& file) {
  return file.parent_path().empty() ? std::filesystem::path(".") : file.parent_path();
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

void config_watcher::reading(file_stamps as_read) {
  asio::post(strand_, [this, as_read = std::move(as_read)]() mutable {
    for (auto& [file, stamp] : as_read)
      as_read_[file] = stamp;
  });
}

void config_watcher::watch(const std::vector<std::filesystem::path>& files) {
  asio::post(strand_, [this, files] {
    if (stopped_) return;
    arm(files);
    if (!waiting_) do_wait();
    // From here on every edit raises an event; one that landed between the reader's read and
    // now raised none that we will see, so it shows only as a difference on disk.
    for (const auto& file : files) {
      const auto it = as_read_.find(file);
      if (it == as_read_.end()) {
        GW_LOG(info) << file.string() << " was loaded unstamped; loading it again to be sure";
        return restart_quiet_period();
      }
      if (it->second != stamp_file(file)) {
        GW_LOG(info) << file.string() << " changed while it was being loaded; loading it again";
        return restart_quiet_period();
      }
    }
  });
}

// On the strand. inotify_add_watch on a directory already watched returns its descriptor
// unchanged, so adding first and removing only what is no longer wanted leaves no gap.
void config_watcher::arm(const std::vector<std::filesystem::path>& files) {
  std::map<int, std::set<std::string>> next;
  for (const auto& file : files) {
    const auto dir = directory_of(file);
    const int wd =
        ::inotify_add_watch(inotify_.native_handle(), dir.c_str(), watched_events | IN_ONLYDIR);
    if (wd < 0) {
      GW_LOG(warning) << "cannot watch " << dir.string()
                      << " for changes: " << std::generic_category().message(errno)
                      << " (reload with SIGHUP instead)";
      continue;
    }
    // inotify hands back the same descriptor for a directory watched twice.
    next[wd].insert(file.filename().string());
  }
  for (const auto& [wd, names] : names_) {
    if (!next.count(wd)) ::inotify_rm_watch(inotify_.native_handle(), wd);
  }
  names_ = std::move(next);
  files_ = files;
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
  // Every event restarts the quiet period: one reload per save, after the last write.
  if (relevant) restart_quiet_period();
  do_wait();
}

void config_watcher::restart_quiet_period() {
  debounce_.expires_after(quiet_);
  debounce_.async_wait([this](std::error_code e) { on_quiet(e); });
}

void config_watcher::on_quiet(std::error_code ec) {
  if (ec || stopped_) return;
  // The reload this starts reads the files after this point: what they hold now, or newer.
  as_read_ = stamp_files(files_);
  changed_();
}

}  // namespace gatewayd::gateway
