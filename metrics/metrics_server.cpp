#include "metrics/metrics_server.hpp"

#include <CivetServer.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <prometheus/text_serializer.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "metrics/family_builder.hpp"
#include "runtime/log.hpp"

namespace gatewayd::metrics {
namespace {

// civetweb gives each connection a thread of its own from a fixed set, for as long as the
// request takes to arrive: a client trickling requests (slowloris) holds one thread per
// connection, and a request that finds every thread held waits in civetweb's queue. Two slow
// connections stopped every scrape with prometheus-cpp's 2 threads and civetweb's 30 s; with 16
// threads and 2 s, 60 of them made a balancer's /readyz wait 3.5 s (issue 42). So: more threads
// than slow connections an allowed host is expected to hold (an idle one costs a stack of mostly
// untouched pages and a buffer of max_request_bytes), and a header timeout short enough that each
// is freed soon (docs/operations.md states the bound this gives /readyz).
constexpr int server_threads = 128;
// Prometheus, curl and health checks send a request in one write, right after the connection
// opens: 500 ms for its request line and headers leaves room for a lost segment's retransmission
// (200 ms at least on Linux) and frees a thread a slow client holds within half a second.
constexpr int request_timeout_ms = 500;
// Every endpoint here is a GET without a body: a request is its request line and headers, a few
// hundred bytes from Prometheus, curl or a balancer's check (a bearer token adds a few hundred
// more). civetweb reads a request into one buffer of this size and refuses anything larger
// (civetweb 1.15 answers 400 "Malformed message") and closes, so no client makes it read or
// parse more (its default is 16 KiB; 1 KiB is its least).
constexpr int max_request_bytes = 4096;

// civetweb's own messages (a client refused by the allow list, say) into the gateway's log, at
// most one line a second: clients may cause them. Bytes a client may have put in them are shown
// as '?' unless printable. Silent while the server closes (the user context, a flag): its own
// knocks (below) come from loopback, which `allow` may refuse.
// The server's listener_state, which CivetServer hands back as const: it was given the mutable
// object at construction (the counts below change it), so casting the const away is sound.
metrics_server::listener_state* state_of(const mg_connection* conn) {
  const auto* server = static_cast<const CivetServer*>(mg_get_user_data(mg_get_context(conn)));
  if (!server) return nullptr;
  return static_cast<metrics_server::listener_state*>(const_cast<void*>(server->getUserContext()));
}

int log_civetweb_message(const mg_connection* conn, const char* message) {
  const auto* state = state_of(conn);
  if (state && state->closing.load()) return 1;
  std::string text{message ? message : ""};
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r'))
    text.pop_back();
  for (char& c : text) {
    if (c < 0x20 || c == 0x7f) c = '?';
  }
  GW_LOG_LIMITED(warning, "metrics server messages") << "metrics server: " << text;
  return 1;  // logged: civetweb writes it nowhere else
}

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

// A worker thread took a connection (civetweb calls this before it reads the request) / closed
// it: the connections holding a thread, which a slow client keeps until request_timeout_ms.
int count_connection(const mg_connection* conn, void**) {
  if (auto* state = state_of(conn)) state->connections.fetch_add(1);
  return 0;
}
void count_close(const mg_connection* conn) {
  if (auto* state = state_of(conn)) state->connections.fetch_sub(1);
}

std::string civetweb_access_list(std::span<const net::cidr_block> allow, bool ipv6) {
  std::string list = "-0.0.0.0/0";
  for (const auto& block : allow) {
    if (block.ipv6 && !ipv6) continue;
    const auto text = block.to_string();  // "10.0.0.0/8", "fd00::/8"
    const auto slash = text.rfind('/');
    list += block.ipv6 ? ",+[" + text.substr(0, slash) + "]" + text.substr(slash) : ",+" + text;
  }
  return list;
}

class metrics_server::listener_collector : public prometheus::Collectable {
 public:
  explicit listener_collector(const listener_state& state) : state_(state) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    return {family_of_one(
        "gatewayd_metrics_connections",
        "Connections to the metrics listener holding one of its " + std::to_string(server_threads) +
            " threads now (a request or a slow client); at that many a "
            "health check waits for one.",
        prometheus::MetricType::Gauge, static_cast<double>(state_.connections.load()))};
  }

 private:
  const listener_state& state_;
};

class metrics_server::endpoint : public CivetHandler {
 public:
  endpoint(std::string path, handler h) : path_(std::move(path)), handler_(std::move(h)) {}

  bool handleGet(CivetServer*, mg_connection* conn) override {
    const mg_request_info* request = mg_get_request_info(conn);
    const std::string_view uri = request->local_uri ? request->local_uri : "";
    response r;
    if (uri != path_) {
      r = {404, "text/plain", "not found\n"};
    } else {
      r = handler_(request->query_string ? request->query_string : "");
    }
    mg_printf(conn,
              "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
              "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
              r.status, mg_get_response_code_text(conn, r.status), r.content_type.c_str(),
              r.body.size());
    mg_write(conn, r.body.data(), r.body.size());
    return true;
  }

 private:
  const std::string path_;
  const handler handler_;
};

metrics_server::metrics_server(const net::endpoint& listen, std::span<const net::cidr_block> allow)
    : listen_(listen) {
  // civetweb wants "[v6]:port" or "v4:port"; the endpoint's own text form is exactly that.
  // Feature 8 is IPv6 (civetweb.h, mg_check_feature).
  const std::vector<std::string> options = {
      "listening_ports",     listen.to_string(),
      "num_threads",         std::to_string(server_threads),
      "request_timeout_ms",  std::to_string(request_timeout_ms),
      "max_request_size",    std::to_string(max_request_bytes),
      "access_control_list", civetweb_access_list(allow, mg_check_feature(8) != 0)};
  CivetCallbacks callbacks;
  callbacks.log_message = log_civetweb_message;
  callbacks.init_connection = count_connection;
  callbacks.connection_close = count_close;
  try {
    server_ = std::make_unique<CivetServer>(options, &callbacks, &state_);
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot serve metrics on " + listen.to_string() + ": " + e.what());
  }
  handle("/metrics", [this](std::string_view) { return scrape(); });
  add(std::make_shared<listener_collector>(state_));
}

// civetweb's master thread waits for connections in poll() with a 2 s timeout and looks at its
// stop flag only in between, and mg_stop() (CivetServer::close()) waits for it: every stop of
// the daemon took up to 2 s more. A connection to the listener wakes that poll, so while the
// server closes a helper knocks on it every 20 ms until close() returns. No request runs once
// the handlers go.
metrics_server::~metrics_server() {
  state_.closing.store(true);
  const unsigned short bound = port();
  std::atomic<bool> stopped{false};
  std::thread knocker([&] {
    while (!stopped.load()) {
      knock(listen_, bound);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  server_->close();
  stopped.store(true);
  knocker.join();
}

void metrics_server::add(std::shared_ptr<prometheus::Collectable> c) {
  std::lock_guard lock(mutex_);
  collectables_.push_back(std::move(c));
}

void metrics_server::handle(const std::string& path, handler h) {
  endpoints_.push_back(std::make_unique<endpoint>(path, std::move(h)));
  server_->addHandler(path, endpoints_.back().get());
}

unsigned short metrics_server::port() const {
  const auto ports = server_->getListeningPorts();
  return ports.empty() ? 0 : static_cast<unsigned short>(ports.front());
}

metrics_server::response metrics_server::scrape() const {
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables;
  {
    std::lock_guard lock(mutex_);  // a leaf: the collectors take their own locks after it
    collectables = collectables_;
  }
  std::vector<prometheus::MetricFamily> families;
  for (const auto& c : collectables) {
    auto more = c->Collect();
    families.insert(families.end(), std::make_move_iterator(more.begin()),
                    std::make_move_iterator(more.end()));
  }
  return {200, "text/plain; version=0.0.4; charset=utf-8",
          prometheus::TextSerializer().Serialize(families)};
}

}  // namespace gatewayd::metrics
