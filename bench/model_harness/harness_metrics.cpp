#include "harness_metrics.hpp"

#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string_view>

#include "consumers/consumer_stats.hpp"

namespace gatewayd::harness {
namespace {

class text {
 public:
  void type(std::string_view name, std::string_view kind) {
    out_ += "# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += kind;
    out_ += '\n';
  }
  // `labels`: "" or `a="x",b="y"`.
  void sample(std::string_view name, const std::string& labels, double value) {
    char number[32];
    std::snprintf(number, sizeof number, "%.9g", value);
    out_ += name;
    if (!labels.empty()) out_ += '{' + labels + '}';
    out_ += ' ';
    out_ += number;
    out_ += '\n';
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

double u(const std::atomic<std::uint64_t>& v) {
  return static_cast<double>(v.load(std::memory_order_relaxed));
}

}  // namespace

std::string render_metrics(const harness_context& ctx, const model_runner& runner,
                           const runtime::latency_histogram& promotion) {
  text t;
  t.type("gatewayd_consumer_connected", "gauge");
  for (const auto& c : ctx.consumers)
    t.sample("gatewayd_consumer_connected", "consumer=\"" + c->name() + '"', 1);
  t.type("gatewayd_consumer_queue_depth", "gauge");
  for (const auto& c : ctx.consumers)
    t.sample("gatewayd_consumer_queue_depth", "consumer=\"" + c->name() + '"',
             u(c->counters().queued));
  t.type("gatewayd_consumer_messages_sent_total", "counter");
  for (const auto& c : ctx.consumers)
    t.sample("gatewayd_consumer_messages_sent_total", "consumer=\"" + c->name() + '"',
             u(c->counters().sent));
  t.type("gatewayd_consumer_dropped_messages_total", "counter");
  for (const auto& c : ctx.consumers) {
    for (std::size_t i = 0; i < consumers::drop_reason_count; ++i) {
      const auto reason = consumers::drop_reason_names.all()[i];
      t.sample("gatewayd_consumer_dropped_messages_total",
               "consumer=\"" + c->name() + "\",reason=\"" + std::string(reason) + '"',
               u(c->counters().dropped[i]));
    }
  }
  t.type("gatewayd_consumer_blocked_seconds_total", "counter");
  for (const auto& c : ctx.consumers) {
    t.sample("gatewayd_consumer_blocked_seconds_total",
             "consumer=\"" + c->name() + "\",cause=\"lock\"",
             u(c->counters().blocked_lock_ns) * 1e-9);
    t.sample("gatewayd_consumer_blocked_seconds_total",
             "consumer=\"" + c->name() + "\",cause=\"write\"",
             u(c->counters().blocked_write_ns) * 1e-9);
  }
  t.type("gatewayd_supplier_connections", "gauge");
  t.sample("gatewayd_supplier_connections", "", u(ctx.connections));
  // Here: times a consumer held a supplier (gatewayd counts read passes that ended paused).
  double pauses = 0;
  for (const auto& c : ctx.consumers)
    pauses += u(c->counters().pauses);
  t.type("gatewayd_supplier_backpressure_pauses_total", "counter");
  t.sample("gatewayd_supplier_backpressure_pauses_total", "", pauses);
  t.type("gatewayd_supplier_messages_received_total", "counter");
  t.sample("gatewayd_supplier_messages_received_total", "", u(ctx.frames_received));
  t.type("gatewayd_supplier_protocol_errors_total", "counter");
  t.sample("gatewayd_supplier_protocol_errors_total", "", u(ctx.protocol_errors));
  t.type("gatewayd_messages_unroutable_total", "counter");
  t.sample("gatewayd_messages_unroutable_total", "", u(ctx.unroutable));
  if (const auto roles = runner.roles()) {
    t.type("gatewayd_lf_threads", "gauge");
    t.sample("gatewayd_lf_threads", "role=\"leader\"", roles->leader);
    t.sample("gatewayd_lf_threads", "role=\"processing\"", roles->processing);
    t.sample("gatewayd_lf_threads", "role=\"follower\"", roles->follower);
    const auto h = promotion.read();
    const std::string_view name = "gatewayd_lf_promotion_latency_seconds";
    t.type(name, "histogram");
    std::uint64_t below = 0;
    for (std::size_t i = 0; i < runtime::latency_histogram::bounds.size(); ++i) {
      below += h.counts[i];
      char le[32];
      std::snprintf(le, sizeof le, "%g", runtime::latency_histogram::bounds[i]);
      t.sample("gatewayd_lf_promotion_latency_seconds_bucket", "le=\"" + std::string(le) + '"',
               static_cast<double>(below));
    }
    t.sample("gatewayd_lf_promotion_latency_seconds_bucket", "le=\"+Inf\"",
             static_cast<double>(h.count));
    t.sample("gatewayd_lf_promotion_latency_seconds_sum", "", h.sum_seconds);
    t.sample("gatewayd_lf_promotion_latency_seconds_count", "", static_cast<double>(h.count));
  }
  return t.take();
}

// ---------------------------------------------------------------------------------------------

namespace {

// One scrape: read the request head (bounded), answer, close.
struct scrape : std::enable_shared_from_this<scrape> {
  explicit scrape(asio::ip::tcp::socket s) : socket(std::move(s)) {}
  asio::ip::tcp::socket socket;
  asio::streambuf request{8192};
  std::string response;
};

std::string http_response(std::string_view status, std::string_view body) {
  std::string out = "HTTP/1.1 ";
  out += status;
  out += "\r\nContent-Type: text/plain; version=0.0.4\r\nConnection: close\r\nContent-Length: ";
  out += std::to_string(body.size());
  out += "\r\n\r\n";
  out += body;
  return out;
}

}  // namespace

metrics_server::metrics_server(const net::endpoint& at, std::function<std::string()> render)
    : acceptor_(ioc_), render_(std::move(render)) {
  const asio::ip::tcp::endpoint ep(asio::ip::make_address(at.host), at.port);
  acceptor_.open(ep.protocol());
  acceptor_.set_option(asio::socket_base::reuse_address(true));
  acceptor_.bind(ep);
  acceptor_.listen();
  do_accept();
  thread_ = std::thread([this] { ioc_.run(); });
}

metrics_server::~metrics_server() {
  ioc_.stop();
  if (thread_.joinable()) thread_.join();
}

void metrics_server::do_accept() {
  acceptor_.async_accept([this](std::error_code ec, asio::ip::tcp::socket s) {
    if (ec) return;
    auto one = std::make_shared<scrape>(std::move(s));
    asio::async_read_until(
        one->socket, one->request, "\r\n\r\n", [this, one](std::error_code read_ec, std::size_t) {
          if (read_ec) return;
          const std::string_view head(static_cast<const char*>(one->request.data().data()),
                                      one->request.size());
          one->response = head.starts_with("GET /metrics ") ? http_response("200 OK", render_())
                                                            : http_response("404 Not Found", "");
          asio::async_write(one->socket, asio::buffer(one->response),
                            [one](std::error_code, std::size_t) {});
        });
    do_accept();
  });
}

}  // namespace gatewayd::harness
