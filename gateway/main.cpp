// gatewayd's entry point: reads the command line and runs, checks, or prints help or version.
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <initializer_list>
#include <iostream>
#include <optional>
#include <string_view>

#include "config/config_warnings.hpp"
#include "config/service_config.hpp"
#include "gateway/command_line.hpp"
#include "gateway/gateway.hpp"
#include "gateway/ports_file.hpp"
#include "net/tls_context.hpp"
#include "routing/routing_table.hpp"
#include "runtime/log.hpp"

#ifndef GATEWAYD_VERSION
#error "GATEWAYD_VERSION must be defined by the build (gateway/CMakeLists.txt)"
#endif

namespace {

using namespace gatewayd;

// After its drain the daemon closes its connections and exits; systemd must not kill it then.
constexpr std::chrono::seconds time_to_exit{2};

// With the unit's stop timeout: false (said) when the lame duck and the drain, which come one
// after the other, would not end before systemd kills gatewayd.
bool drain_fits_the_unit(const config::service_config& service, const gateway::command_line& line) {
  const auto stop = service.lame_duck + service.drain_timeout;
  const auto stop_timeout = line.stop_timeout;
  if (!stop_timeout || stop + time_to_exit <= *stop_timeout) return true;
  std::cerr << service.config_file.string() << ": gateway."
            << (service.lame_duck.count() ? "lame_duck_ms + drain_timeout_ms = " +
                                                std::to_string(service.lame_duck.count()) + " + "
                                          : std::string("drain_timeout_ms = "))
            << service.drain_timeout.count() << " does not leave " << time_to_exit.count()
            << " s of the unit's TimeoutStopSec=" << stop_timeout->count()
            << " to exit in: systemd would kill gatewayd in the middle of its drain; lower "
               "drain_timeout_ms, or raise TimeoutStopSec and GATEWAYD_TIMEOUT_STOP_SEC in a "
               "drop-in\n";
  return false;
}

// `gatewayd --check`: the same loading and table building as a start or a reload, so a
// configuration that passes here is one the daemon accepts. With the unit's stop timeout, it
// also refuses a drain that systemd would kill before it ends. Warnings go to stderr and leave
// the exit status alone.
int check_configuration(const gateway::command_line& line) {
  auto creds = config::credentials::from_environment();
  creds.readable = !line.skip_credentials;
  auto loaded = config::load_full_config(line.config, creds);
  if (!loaded.config) {
    for (const auto& e : loaded.errors)
      std::cerr << e.to_string() << '\n';
    return 1;
  }
  const auto& service = loaded.config->service;
  if (!drain_fits_the_unit(service, line)) return 1;
  try {
    routing::routing_table::build(loaded.config->routing.rules());
  } catch (const std::exception& e) {
    std::cerr << loaded.config->service.routes_file.string() << ": " << e.what() << '\n';
    return 1;
  }
  // With --skip-credentials, files in the credentials directory are left to the running gateway.
  const auto held = [&](std::initializer_list<std::filesystem::path> names) {
    return !creds.readable &&
           std::any_of(names.begin(), names.end(), [&](const auto& f) { return creds.holds(f); });
  };
  const auto files = service.tls_files();
  bool skipped = files && held({files->cert, files->key, files->client_ca, files->crl});
  std::vector<config::config_error> warnings;
  if (files && !skipped) {
    const auto built = net::make_tls_server_context(*files);
    if (!built.context) {
      std::cerr << service.config_file.string() << ": [tls] " << built.error << '\n';
      return 1;
    }
    config::add_stale_crl_warnings(built.crls, service.config_file.string(), 0, 0, "tls.crl",
                                   warnings);
  }
  for (const auto& c : loaded.config->routing.consumers) {
    const auto* t = c.tls ? &c.tls->files : nullptr;
    if (t && held({t->ca, t->cert, t->key, t->crl})) skipped = true;
  }
  for (const auto& w : config::configuration_warnings(*loaded.config, creds))
    warnings.push_back(w);
  for (const auto& w : warnings)
    std::cerr << w.to_string() << '\n';
  std::cout << "configuration OK: " << loaded.config->routing.consumers.size() << " consumers, "
            << loaded.config->routing.routes.size() << " routes"
            << (skipped ? " (the TLS files in " + creds.directory->string() + " not read)"
                        : std::string{})
            << '\n';
  return 0;
}

// What the listeners of `gw` got, for --ports-file.
gateway::bound_ports bound_ports_of(const gateway::gateway& gw) {
  const auto s = gw.supplier_endpoint();
  gateway::bound_ports ports{::getpid(), {s.address().to_string(), s.port()}, std::nullopt};
  if (gw.metrics_port() != 0)
    ports.metrics = {gw.settings().metrics_listen.host, gw.metrics_port()};
  return ports;
}

// `gatewayd --config PATH`: start-up errors (bad config, a port in use, a ports file that
// cannot be written) exit 1 with the reason.
int run_daemon(const std::filesystem::path& config, const std::filesystem::path& ports_path) {
  auto loaded = config::load_full_config(config);
  if (!loaded.config) {
    for (const auto& e : loaded.errors)
      GW_LOG(error) << e.to_string();
    GW_LOG(error) << "not starting: " << loaded.errors.size() << " configuration error(s)";
    return 1;
  }
  log::set_level(loaded.config->service.log_level);
  for (const auto& w :
       config::configuration_warnings(*loaded.config, config::credentials::from_environment()))
    GW_LOG(warning) << w.to_string();
  try {
    GW_LOG(info) << "gatewayd " << GATEWAYD_VERSION << " starting with " << config.string();
    gateway::gateway gw(std::move(loaded.config->service), loaded.config->routing,
                        std::move(loaded.config->routes_sha256));
    std::optional<gateway::ports_file> ports;  // the listeners are bound from here on
    if (!ports_path.empty()) ports.emplace(ports_path, bound_ports_of(gw));
    gw.run();  // a stop that had to be forced exits 0 as well: it was asked for
  } catch (const std::exception& e) {
    GW_LOG(error) << "not starting: " << e.what();
    return 1;
  }
  return 0;
}

// One malloc arena for the whole process, set before any thread starts. glibc gives each
// thread that meets a locked arena one of its own, up to 8 per core, and an arena keeps what
// was freed in it: the pool's threads read chunks and build write batches in one arena and free
// them in another, and the metrics listener's threads (128) answer scrapes in more, so a burst
// of queued frames left the process hundreds of MiB larger after every queue had drained and
// the next fill took fresh pages beside the retained ones (issue 42: RSS 2-3.6x the queued
// bytes). With one arena, what a drained queue frees is reused by the next fill and handed back
// by consumers::queue_memory's trim. The data path allocates nothing per frame (chunks are
// recycled per thread, rings and batches keep their storage), so the shared arena's lock is
// taken only when a cache misses. An operator's MALLOC_ARENA_MAX (or glibc.malloc.arena_max
// tunable) wins: glibc has read it already, and it is left alone.
void use_one_malloc_arena() noexcept {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (std::getenv("MALLOC_ARENA_MAX") ||
      (tunables && std::string_view(tunables).find("arena_max") != std::string_view::npos))
    return;
  ::mallopt(M_ARENA_MAX, 1);
}

}  // namespace

int main(int argc, char** argv) {
  use_one_malloc_arena();
  const std::string program =
      argc > 0 ? std::filesystem::path{argv[0]}.filename().string() : "gatewayd";
  const auto parsed = gateway::parse_command_line(argc, argv);
  if (!parsed.line) {
    std::cerr << program << ": " << parsed.error << "\n\n" << gateway::usage(program);
    return 2;
  }
  switch (parsed.line->what) {
    case gateway::command_line::mode::help:
      std::cout << gateway::usage(program);
      return 0;
    case gateway::command_line::mode::version:
      std::cout << "gatewayd " << GATEWAYD_VERSION << '\n';
      return 0;
    case gateway::command_line::mode::check:
      return check_configuration(*parsed.line);
    case gateway::command_line::mode::run:
      break;
  }
  return run_daemon(parsed.line->config, parsed.line->ports_file);
}
