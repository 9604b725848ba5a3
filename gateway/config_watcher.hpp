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

#include "runtime/executor.hpp"

namespace gatewayd::gateway {

class config_watcher {
 public:
  using on_change = std::function<void()>;

  // `changed` runs on a pool thread once events stopped arriving for `quiet`.
  config_watcher(const runtime::executor& ex, on_change changed,
                 std::chrono::milliseconds quiet = std::chrono::milliseconds(200));
  ~config_watcher();
  config_watcher(const config_watcher&) = delete;
  config_watcher& operator=(const config_watcher&) = delete;

  // Watches exactly `files` from now on (replacing what was watched before). The directory
  // of each file is watched, not the file: editors save by writing a new file and renaming
  // it over the old one, which a watch on the old inode would never see. Throws
  // std::system_error when inotify is unavailable; a directory that cannot be watched is
  // logged and skipped. Call from one strand only, like stop().
  void watch(const std::vector<std::filesystem::path>& files);
  void stop();

 private:
  void do_wait();
  void on_readable(std::error_code ec);
  void on_quiet(std::error_code ec);

  runtime::strand strand_;
  asio::posix::stream_descriptor inotify_;
  asio::steady_timer debounce_;
  on_change changed_;
  std::chrono::milliseconds quiet_;
  std::map<int, std::set<std::string>> names_;  // watch descriptor -> file names it covers
  bool waiting_ = false;
  bool stopped_ = false;
};

}  // namespace gatewayd::gateway
