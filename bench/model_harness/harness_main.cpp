// model-harness: a minimal gateway over the product's frame path (protocol/, routing/,
// consumers/ queue and admission, runtime::lf_pool) that runs the concurrency and drain models
// the patterns' comparison needs, so they need not live in gatewayd (docs/benchmarks.md).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/service_config.hpp"
#include "harness_consumer.hpp"
#include "harness_metrics.hpp"
#include "harness_models.hpp"
#include "harness_supplier.hpp"
#include "runtime/executor.hpp"

namespace {

using namespace gatewayd;
using namespace gatewayd::harness;

constexpr std::string_view usage =
    "usage: model-harness --config gatewayd.toml --model leader-followers|half-sync-half-async|"
    "asio-threads --drain strand|mutex [--threads N] [--ports-file FILE]\n";

struct options {
  std::filesystem::path config;
  std::filesystem::path ports_file;
  model which = model::leader_followers;
  drain_kind drain = drain_kind::strand;
  std::optional<unsigned> threads;  // else gatewayd.toml's
};

std::optional<options> parse(int argc, char** argv) {
  options o;
  bool have_model = false;
  bool have_drain = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view key = argv[i];
    const std::string_view value = argv[i + 1];
    if (key == "--config") {
      o.config = value;
    } else if (key == "--ports-file") {
      o.ports_file = value;
    } else if (key == "--model" && model_names.parse(value)) {
      o.which = *model_names.parse(value);
      have_model = true;
    } else if (key == "--drain" && drain_kind_names.parse(value)) {
      o.drain = *drain_kind_names.parse(value);
      have_drain = true;
    } else if (key == "--threads" && value.find_first_not_of("0123456789") == value.npos &&
               !value.empty() && value.size() < 4) {
      o.threads = static_cast<unsigned>(std::stoul(std::string(value)));
    } else {
      return std::nullopt;
    }
  }
  if (argc % 2 == 0 || o.config.empty() || !have_model || !have_drain) return std::nullopt;
  return o;
}

// What the harness leaves out of the product; a configuration that needs it is refused.
std::optional<std::string> unsupported(const config::full_config& c) {
  if (c.service.tls_files()) return "[tls] on the supplier listener";
  if (c.service.proxy_protocol) return "proxy_protocol";
  if (!c.service.allow.empty()) return "allow (the harness accepts every supplier)";
  if (!c.routing.suppliers.empty() ||
      c.routing.suppliers_default.publish != std::vector<std::string>{">"} ||
      !c.routing.suppliers_default.deny.empty())
    return "publish permissions (the harness lets every supplier publish anything)";
  for (const auto& spec : c.routing.consumers) {
    if (spec.tls) return "consumer " + spec.name + ": tls";
    if (spec.overflow == consumers::overflow_policy::disconnect)
      return "consumer " + spec.name + ": overflow = \"disconnect\" (the harness never redials)";
  }
  return std::nullopt;
}

std::string text_of(const asio::ip::tcp::endpoint& ep) {
  return net::endpoint{ep.address().to_string(), ep.port()}.to_string();
}

// gatewayd's ports file format, written whole (rename) once the listeners are bound.
void write_ports_file(const std::filesystem::path& path, const std::string& supplier,
                      const std::optional<std::string>& metrics) {
  const auto tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "{\"pid\": " << ::getpid() << ", \"supplier\": \"" << supplier
        << "\", \"metrics\": " << (metrics ? '"' + *metrics + '"' : std::string("null")) << "}\n";
    if (!out) throw std::runtime_error("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path);
}

int run(const options& o) {
  auto loaded = config::load_full_config(o.config);
  if (!loaded.config) {
    for (const auto& e : loaded.errors)
      std::cerr << e.to_string() << '\n';
    return 1;
  }
  const config::full_config& cfg = *loaded.config;
  if (const auto what = unsupported(cfg)) {
    std::cerr << "model-harness: " << o.config.string() << ": " << *what
              << " is not supported by the model harness\n";
    return 1;
  }
  // Every thread started from here on inherits the mask: only sigwait() below sees the stop.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // Declared before the io_context: sessions destroyed with its handlers may still count here.
  harness_context ctx;
  ctx.table = routing::routing_table::build(cfg.routing.rules());
  ctx.max_payload = cfg.service.max_payload;
  runtime::latency_histogram promotion;

  asio::io_context ioc;
  model_runner runner(o.which, ioc, o.threads.value_or(cfg.service.threads), promotion,
                      cfg.service.idle_poll);
  ctx.handoff = runner.handoff();
  const runtime::executor ex = runtime::make_executor(ioc);
  // The benchmark starts its receivers first: each consumer is dialled once, here.
  for (const auto& spec : cfg.routing.consumers) {
    ctx.consumers.push_back(
        std::make_shared<harness_consumer>(ex, spec, o.drain, cfg.service.slow_consumer));
    ctx.consumers.back()->connect();
  }
  const auto listener = std::make_shared<supplier_listener>(ex, cfg.service.supplier_listen, ctx);
  std::optional<metrics_server> metrics;
  if (cfg.service.metrics_enabled) {
    metrics.emplace(cfg.service.metrics_listen,
                    [&] { return render_metrics(ctx, runner, promotion); });
  }
  const std::string supplier_at = text_of(listener->local_endpoint());
  const std::optional<std::string> metrics_at =
      metrics ? std::optional(text_of(metrics->local_endpoint())) : std::nullopt;
  if (!o.ports_file.empty()) write_ports_file(o.ports_file, supplier_at, metrics_at);

  listener->start();
  runner.start();
  std::cerr << "model-harness: " << model_names(o.which) << ", " << drain_kind_names(o.drain)
            << " drain, " << runner.threads() << " threads; suppliers on " << supplier_at
            << ", metrics on " << metrics_at.value_or("(off)") << std::endl;

  int signal = 0;
  sigwait(&stop_signals, &signal);
  runner.stop_and_join();
  metrics.reset();
  if (!o.ports_file.empty()) std::filesystem::remove(o.ports_file);
  // What is still queued is dropped; the consumers and sessions go with the handlers that hold
  // them, when the io_context is destroyed.
  ctx.consumers.clear();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const auto o = parse(argc, argv);
  if (!o) {
    std::cerr << usage;
    return 2;
  }
  try {
    return run(*o);
  } catch (const std::exception& e) {
    std::cerr << "model-harness: " << e.what() << '\n';
    return 1;
  }
}
