#include "metrics/metrics_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace gatewayd::metrics {
namespace {

// civetweb gives each connection a thread of its own from a fixed set, for as long as the
// request takes to arrive: a client trickling requests (slowloris) holds one thread per
// connection. prometheus-cpp's default is 2 threads and civetweb's header timeout 30 s, so two
// slow connections stopped every scrape. With 16 threads, up to 15 slow connections cost a
// scrape nothing; beyond that a scrape waits in civetweb's queue behind them, each thread
// freed after at most the header timeout (docs/security.md has the numbers).
constexpr int server_threads = 16;
// Prometheus sends a scrape's request in one write; 2 s for its headers is plenty.
constexpr int request_timeout_ms = 2000;

// Opens and closes one connection to the listener at `at` (a wildcard address is reached on
// loopback). Plain sockets: this runs on a thread of its own, outside every event loop.
void knock(const net::endpoint& at, unsigned short port) noexcept {
  sockaddr_storage addr{};
  socklen_t len = 0;
  if (at.is_ipv6()) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&addr);
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(port);
    if (::inet_pton(AF_INET6, at.host == "::" ? "::1" : at.host.c_str(), &a6->sin6_addr) != 1)
      return;
    len = sizeof *a6;
  } else {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&addr);
    a4->sin_family = AF_INET;
    a4->sin_port = htons(port);
    if (::inet_pton(AF_INET, at.host == "0.0.0.0" ? "127.0.0.1" : at.host.c_str(), &a4->sin_addr) !=
        1)
      return;
    len = sizeof *a4;
  }
  const int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  (void)::connect(fd, reinterpret_cast<const sockaddr*>(&addr), len);
  ::close(fd);
}

}  // namespace

metrics_server::metrics_server(const net::endpoint& listen) : listen_(listen) {
  // civetweb wants "[v6]:port" or "v4:port"; the endpoint's own text form is exactly that.
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", listen.to_string(), "num_threads", std::to_string(server_threads),
        "request_timeout_ms", std::to_string(request_timeout_ms)});
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot serve metrics on " + listen.to_string() + ": " + e.what());
  }
}

// civetweb's master thread waits for connections in poll() with a 2 s timeout and looks at its
// stop flag only in between, and mg_stop() (the exposer's destructor) waits for it: every stop
// of the daemon took up to 2 s more. A connection to the listener wakes that poll, so while the
// exposer is being destroyed a helper knocks on it every 20 ms until the destructor returns.
metrics_server::~metrics_server() {
  const unsigned short bound = port();
  std::atomic<bool> stopped{false};
  std::thread knocker([&] {
    while (!stopped.load()) {
      knock(listen_, bound);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  exposer_.reset();
  stopped.store(true);
  knocker.join();
}

void metrics_server::add(std::shared_ptr<prometheus::Collectable> c) {
  exposer_->RegisterCollectable(c);
  collectables_.push_back(std::move(c));  // the exposer keeps only a weak_ptr
}

unsigned short metrics_server::port() const {
  const auto ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : static_cast<unsigned short>(ports.front());
}

}  // namespace gatewayd::metrics
