#include "metrics/metrics_server.hpp"

#include <CivetServer.h>
#include <prometheus/text_serializer.h>

#include <stdexcept>

namespace gatewayd::metrics {

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

metrics_server::metrics_server(const net::endpoint& listen) {
  // civetweb wants "[v6]:port" or "v4:port"; the endpoint's own text form is exactly that.
  // Two threads, as prometheus-cpp's exposer ran: a scrape and a health check at once.
  const std::vector<std::string> options = {"listening_ports", listen.to_string(), "num_threads",
                                            "2"};
  try {
    server_ = std::make_unique<CivetServer>(options);
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot serve metrics on " + listen.to_string() + ": " + e.what());
  }
  handle("/metrics", [this](std::string_view) { return scrape(); });
}

metrics_server::~metrics_server() {
  server_->close();  // no request runs once the handlers go
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
