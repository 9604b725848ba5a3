#include "gateway/reloader.hpp"

#include <malloc.h>
#include <algorithm>
#include <chrono>
#include <exception>

#include "config/settings.hpp"
#include "routing/routing_table.hpp"
#include "runtime/log.hpp"

namespace gatewayd::gateway {

namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

reloader::reloader(const runtime::executor& ex, runtime::strand& control, parts with,
                   const std::vector<consumers::consumer_spec>& started_with)
    : executor_(ex),
      control_(control),
      parts_(with),
      started_from_(stamp_files(watched_files(&started_with))) {
  stats_.last_success_unix_seconds = unix_now();  // the initial load counts as a success
}

void reloader::watch() {
  try {
    watcher_ = std::make_unique<config_watcher>(executor_, [this] { request("file changed"); });
    watcher_->reading(std::move(started_from_));
    watcher_->watch(watched_files());
  } catch (const std::exception& e) {
    GW_LOG(warning) << "not watching the configuration files (" << e.what()
                    << "); reload with SIGHUP";
  }
}

void reloader::request(std::string trigger) {
  asio::post(control_, [this, trigger = std::move(trigger)] { do_reload(trigger); });
}

void reloader::on_sighup() {
  if (stopped_.load() || queued_.exchange(true)) return;
  asio::post(control_, [this] {
    queued_.store(false);
    if (watcher_) watcher_->reading(stamp_files(watched_files()));
    do_reload("SIGHUP");
  });
}

void reloader::stop() {
  if (stopped_.exchange(true)) return;
  if (watcher_) watcher_->stop();
}

// On the control strand. Validates both files whole and builds the new table off to the side
// before touching anything: a failure leaves the running table, consumers and settings as
// they were.
void reloader::do_reload(std::string_view trigger) {
  if (stopped_.load()) return;
  const auto applied = apply_files(trigger);
  // What the reload parsed, and the tables it replaced (each gone once every router has moved
  // on), went back to the arena of whichever pool thread ran it; glibc keeps such freed memory
  // per arena, so reloads on different threads piled up copies (100,000 routes: RSS 101 MB
  // after start, 354 MB after 40 reloads). Handing it back to the system after each reload,
  // before it is reported done, keeps the process within about one table of what it needs.
  // Milliseconds, on this strand.
  ::malloc_trim(0);
  if (applied) succeeded(trigger, *applied);
}

std::optional<reloader::applied_sizes> reloader::apply_files(std::string_view trigger) {
  std::string status = "reloading the configuration (";
  status += trigger;
  status += ')';
  parts_.notify.reloading(status);
  auto loaded = config::load_full_config(parts_.settings.config_file);
  if (!loaded.config) {
    for (const auto& e : loaded.errors)
      GW_LOG(error) << e.to_string();
    failed(trigger, loaded.errors.size());
    return std::nullopt;
  }
  auto& next = *loaded.config;
  auto table = prepare(next);
  if (!table) {
    failed(trigger, 1);
    return std::nullopt;
  }
  apply_settings(next.service);
  const applied_sizes sizes{next.routing.consumers.size(), next.routing.routes.size()};
  parts_.consumers.apply(next.routing, std::move(next.routes_sha256), std::move(table));
  if (watcher_) watcher_->watch(watched_files());
  return sizes;
}

void reloader::succeeded(std::string_view trigger, applied_sizes applied) {
  stats_.succeeded.fetch_add(1);
  stats_.last_successful.store(true);
  stats_.last_success_unix_seconds.store(unix_now());
  GW_LOG(info) << "routing table reloaded (" << trigger << "): " << applied.consumers
               << " consumers, " << applied.routes << " routes";
  parts_.notify.ready(parts_.consumers.status());
}

std::shared_ptr<const routing::routing_table> reloader::prepare(const config::full_config& next) {
  std::shared_ptr<const routing::routing_table> table;
  try {
    table = routing::routing_table::build(next.routing.rules());
  } catch (const std::exception& e) {
    GW_LOG(error) << next.service.routes_file.string() << ": " << e.what();
    return nullptr;
  }
  // The certificates are validated before anything is applied: a bad pair fails the whole
  // reload, and the running context (and table) stay.
  if (!reload_tls(next.service)) return nullptr;
  return table;
}

void reloader::failed(std::string_view trigger, std::size_t errors) {
  stats_.failed.fetch_add(1);
  stats_.last_successful.store(false);
  GW_LOG(error) << "reload (" << trigger << ") failed with " << errors
                << " configuration error(s); the running routing table stays in force";
  std::string status = parts_.consumers.status();
  status += "; the last reload failed with ";
  status += std::to_string(errors);
  status += " error(s), see the journal";
  parts_.notify.ready(status);
}

// What the settings table (config/settings.cpp) says a reload may change is applied; what
// needs a restart keeps its running value and the operator is told, not ignored.
void reloader::apply_settings(const config::service_config& next) {
  auto& running = parts_.settings;
  const auto plan = config::plan_reload(running, next);
  for (const config::setting* s : plan.restart) {
    GW_LOG(warning) << running.config_file.string() << ": " << s->path() << " changed from "
                    << s->text(running) << " to " << s->text(next) << ": needs a restart; keeping "
                    << s->text(running) << " until then";
  }
  if (plan.unclassified) {
    GW_LOG(error) << running.config_file.string()
                  << ": a setting changed that the reload does not know; it is not applied";
  }
  // Read on this strand only, so plain assignment is enough.
  for (const config::setting* s : plan.live) {
    s->copy(running, next);
    apply(s->hook);
  }
}

// What a live key needs beyond its new value in the running settings. The switch names every
// hook, so a hook added to the table and not handled here fails the build (-Wswitch, -Werror).
void reloader::apply(config::apply_hook hook) {
  const auto& running = parts_.settings;
  switch (hook) {
    case config::apply_hook::none:
      return;
    case config::apply_hook::log_level:
      log::set_level(running.log_level);
      return;
    case config::apply_hook::kernel_tls:
      parts_.listener.offer_kernel_tls(running.tls_ktls == config::ktls_mode::automatic);
      return;
    case config::apply_hook::allow_list:
      apply_allow_list();
      return;
  }
}

// New connections are checked against the new list from the swap on; open ones from networks
// it no longer admits are closed, so that removing a network takes effect without a restart.
void reloader::apply_allow_list() {
  const auto& allow = parts_.settings.allow;
  const std::size_t expelled = parts_.listener.admit_only(allow);
  GW_LOG(info) << "allow list changed to " << allow.size() << " block(s); closing " << expelled
               << " supplier connection(s) it no longer admits";
}

// The whole context is rebuilt, CA included (mosquitto's reload kept the old CA): new
// connections use the new one, open ones keep theirs.
bool reloader::reload_tls(const config::service_config& next) {
  auto* tls = parts_.listener.tls();
  if (!tls) return true;  // a plaintext listener: turning TLS on takes a restart
  // New paths apply with the reload (apply_settings then takes them, and the watcher follows);
  // a file that turns TLS off keeps the running files, reread.
  const auto files = next.tls_files() ? next.tls_files() : parts_.settings.tls_files();
  auto built = net::make_tls_server_context(*files);
  if (!built.context) {
    GW_LOG(error) << "[tls] " << built.error
                  << "; new supplier connections keep the running "
                     "certificate, key and CA";
    return false;
  }
  parts_.listener.use_tls(std::move(built));
  GW_LOG(info) << "[tls] certificate, key and CA" << (files->crl.empty() ? "" : " and CRL")
               << " reloaded from " << files->cert.string();
  return true;
}

std::vector<std::filesystem::path> reloader::watched_files(
    const std::vector<consumers::consumer_spec>* consumers) const {
  const auto& running = parts_.settings;
  std::vector<std::filesystem::path> files{running.config_file, running.routes_file};
  if (const auto tls = running.tls_files()) {
    files.push_back(tls->cert);
    files.push_back(tls->key);
    if (!tls->client_ca.empty()) files.push_back(tls->client_ca);
    if (!tls->crl.empty()) files.push_back(tls->crl);
  }
  // The consumers' PEM files too: a certificate rotated in place reloads, and the consumers
  // whose files' digest changed redial with the new context.
  // (The constructor names its consumers: none is published yet when it stamps the files.)
  const auto snapshot = consumers ? nullptr : parts_.consumers.routes().load();
  if (snapshot) consumers = &snapshot->specs;
  if (!consumers) return files;
  for (const auto& spec : *consumers) {
    if (!spec.tls) continue;
    for (const auto* f :
         {&spec.tls->files.ca, &spec.tls->files.cert, &spec.tls->files.key, &spec.tls->files.crl}) {
      if (!f->empty() && std::find(files.begin(), files.end(), *f) == files.end())
        files.push_back(*f);
    }
  }
  return files;
}

}  // namespace gatewayd::gateway
