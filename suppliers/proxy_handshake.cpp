#include "suppliers/proxy_handshake.hpp"

namespace gatewayd::suppliers {
namespace {

asio::ip::tcp::endpoint to_endpoint(const net::proxy_address& a) {
  if (a.ipv6) {
    asio::ip::address_v6::bytes_type b;
    std::copy(a.bytes.begin(), a.bytes.end(), b.begin());
    return {asio::ip::address_v6(b), a.port};
  }
  asio::ip::address_v4::bytes_type b;
  std::copy(a.bytes.begin(), a.bytes.begin() + 4, b.begin());
  return {asio::ip::address_v4(b), a.port};
}

}  // namespace

proxy_handshake::proxy_handshake(asio::ip::tcp::socket socket, std::chrono::milliseconds timeout)
    : socket_(std::move(socket)), deadline_(socket_.get_executor()), timeout_(timeout) {}

void proxy_handshake::start(completion done) {
  done_ = std::move(done);
  asio::dispatch(socket_.get_executor(), [self = shared_from_this()] {
    // Evicted before it began (a newer connection took its slot meanwhile).
    if (self->evicted_) {
      return self->finish({false, std::nullopt, "evicted by a newer connection", true});
    }
    self->deadline_.expires_after(self->timeout_);
    self->deadline_.async_wait([self](std::error_code ec) {
      if (ec || self->finished_) return;
      self->timed_out_ = true;
      std::error_code ignored;
      self->socket_.cancel(ignored);  // the pending read ends with operation_aborted
    });
    self->read_up_to(net::proxy_v2_fixed_size);
  });
}

void proxy_handshake::end(bool evicted) {
  asio::post(socket_.get_executor(), [self = shared_from_this(), evicted] {
    if (self->finished_) return;
    self->evicted_ = evicted;
    std::error_code ignored;
    self->deadline_.cancel();
    self->socket_.cancel(ignored);
  });
}

// Reads exactly up to `total` bytes: the parser names the header's size before its end, so
// the supplier's first frame stays in the socket for the session.
void proxy_handshake::read_up_to(std::size_t total) {
  asio::async_read(
      socket_, asio::buffer(header_.data() + have_, total - have_),
      [self = shared_from_this()](std::error_code ec, std::size_t n) { self->on_read(ec, n); });
}

void proxy_handshake::on_read(std::error_code ec, std::size_t n) {
  have_ += n;
  if (ec) {
    return finish({false, std::nullopt,
                   timed_out_                             ? "no PROXY header in time"
                   : evicted_                             ? "evicted by a newer connection"
                   : ec == asio::error::operation_aborted ? "the listener closed"
                                                          : "closed before its PROXY header",
                   evicted_ && !timed_out_});
  }
  const auto r = net::parse_proxy_v2(std::span(header_.data(), have_));
  switch (r.state) {
    case net::proxy_parse_result::status::need_more:
      return read_up_to(r.needed);
    case net::proxy_parse_result::status::error:
      return finish({false, std::nullopt, std::string(net::to_string(r.error))});
    case net::proxy_parse_result::status::done:
      break;
  }
  outcome o{true, std::nullopt, {}};
  if (r.header.source) o.supplier = to_endpoint(*r.header.source);
  finish(std::move(o));
}

void proxy_handshake::finish(outcome o) {
  finished_ = true;
  deadline_.cancel();
  done_(std::move(socket_), std::move(o));
}

}  // namespace gatewayd::suppliers
