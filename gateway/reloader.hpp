// Reads both configuration files again (SIGHUP, a change on disk) and applies them all or
// nothing: a bad edit keeps the running table, consumers, settings and [tls] context.
#pragma once

#include <atomic>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/routes_config.hpp"
#include "config/service_config.hpp"
#include "config/settings.hpp"
#include "gateway/config_watcher.hpp"
#include "gateway/consumer_set.hpp"
#include "gateway/file_stamp.hpp"
#include "gateway/supplier_listener.hpp"
#include "gateway/systemd_notify.hpp"
#include "metrics/reload_stats.hpp"
#include "routing/routing_table.hpp"
#include "runtime/executor.hpp"

namespace gatewayd::gateway {

// Reloads run on the gateway's control strand, one at a time, as the stop does.
class reloader {
 public:
  // What a reload changes; each outlives the reloader. `settings` are the running ones, written
  // on the control strand only.
  struct parts {
    config::service_config& settings;
    consumer_set& consumers;
    supplier_listener& listener;
    systemd_notify& notify;
  };

  // Stamps the files start-up read (`started_with`: the consumers it named, not yet published)
  // for the watcher to compare with the disk once it runs.
  reloader(const runtime::executor& ex, runtime::strand& control, parts with,
           const std::vector<consumers::consumer_spec>& started_with);
  reloader(const reloader&) = delete;
  reloader& operator=(const reloader&) = delete;

  // Watches the configuration and PEM files with inotify: a change reloads. Without inotify
  // (logged), SIGHUP still does.
  void watch();
  // From any thread: reload on the control strand, naming `trigger` in the log.
  void request(std::string trigger);
  // From any thread: a SIGHUP. At most one waits: one that finds a reload waiting is served by
  // it, since that one reads the files after this signal came.
  void on_sighup();
  // From any thread: no reload starts from now on (a stop began); the watcher stops.
  void stop();

  const metrics::reload_stats& stats() const noexcept { return stats_; }

 private:
  void do_reload(std::string_view trigger);
  struct applied_sizes {
    std::size_t consumers = 0, routes = 0;
  };
  // Loads, validates and applies both files; or keeps what runs, tells why (failed()) and
  // returns nothing.
  std::optional<applied_sizes> apply_files(std::string_view trigger);
  // Counted, logged and told to systemd once what the reload freed went back (do_reload).
  void succeeded(std::string_view trigger, applied_sizes applied);
  // What can fail, before anything else is applied: the new table, the [tls] context (stored
  // once it loads). Null (logged) when the reload must fail.
  std::shared_ptr<const routing::routing_table> prepare(const config::full_config& next);
  void failed(std::string_view trigger, std::size_t errors);
  void apply_settings(const config::service_config& next);
  void apply(config::apply_hook hook);
  void apply_allow_list();
  // [tls] on: builds a context from the [tls] files `next` names (the running ones if `next`
  // turns TLS off, which takes a restart); false (logged) when they do not load or do not
  // match, and the running context stays.
  bool reload_tls(const config::service_config& next);
  // The files a change of which reloads: both configuration files and the [tls] PEM files.
  // The TLS consumers' PEM files too: of `consumers`, or (null) of the running snapshot.
  std::vector<std::filesystem::path> watched_files(
      const std::vector<consumers::consumer_spec>* consumers = nullptr) const;

  runtime::executor executor_;
  runtime::strand& control_;
  parts parts_;
  file_stamps started_from_;  // what start-up read, for the watcher to compare with the disk
  std::unique_ptr<config_watcher> watcher_;  // null until watch(), or without inotify
  metrics::reload_stats stats_;
  std::atomic<bool> queued_{false};  // a SIGHUP's reload waits on the control strand
  std::atomic<bool> stopped_{false};
};

}  // namespace gatewayd::gateway
