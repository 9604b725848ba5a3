// Watches configuration files for changes with inotify and reports each burst of changes
// once, after it has been quiet for a moment (an editor's save is several events).
#pragma once

#include <asio.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gateway/file_stamp.hpp"
#include "runtime/executor.hpp"

namespace gatewayd::gateway {

// A reload reads the files and then re-arms the watches (watch()). An edit that lands in
// between must not be lost: the watches of directories still wanted are kept (never removed
// and added again, which would drop their pending events), and after arming, what is on disk
// is compared with what the reload read (reading()); a difference is reported as a change.
class config_watcher {
 public:
  using on_change = std::function<void()>;

  // `changed` runs on a pool thread once events stopped arriving for `quiet`. The watcher
  // stamps the files it watches just before it calls `changed`: that is what the reload the
  // callback starts will read, or older.
  config_watcher(const runtime::executor& ex, on_change changed,
                 std::chrono::milliseconds quiet = std::chrono::milliseconds(200));
  ~config_watcher();
  config_watcher(const config_watcher&) = delete;
  config_watcher& operator=(const config_watcher&) = delete;

  // What a reload that the watcher did not start (SIGHUP, start-up) is about to read: stamps
  // taken just before its read. Any time before the read is safe (it can only cost a reload).
  void reading(file_stamps as_read);
  // Watches exactly `files` from now on. The directory of each file is watched, not the file:
  // editors save by writing a new file and renaming it over the old one, which a watch on the
  // old inode would never see. A file that differs from its stamp as read, or that nobody
  // stamped, is reported as changed. Throws std::system_error when inotify is unavailable (in
  // the constructor); a directory that cannot be watched is logged and skipped. Callable from
  // any thread, like reading() and stop(); they take effect in the order they were called.
  void watch(const std::vector<std::filesystem::path>& files);
  void stop();

 private:
  void arm(const std::vector<std::filesystem::path>& files);
  void do_wait();
  void on_readable(std::error_code ec);
  void restart_quiet_period();
  void on_quiet(std::error_code ec);

  runtime::strand strand_;
  asio::posix::stream_descriptor inotify_;
  asio::steady_timer debounce_;
  on_change changed_;
  std::chrono::milliseconds quiet_;
  std::map<int, std::set<std::string>> names_;  // watch descriptor -> file names it covers
  std::vector<std::filesystem::path> files_;    // what is watched
  file_stamps as_read_;                         // what the latest reload read, or older
  bool waiting_ = false;
  bool stopped_ = false;
};

}  // namespace gatewayd::gateway
