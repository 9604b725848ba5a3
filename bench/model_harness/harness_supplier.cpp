#include "harness_supplier.hpp"

#include <cstdio>
#include <stdexcept>

#include "harness_models.hpp"

namespace gatewayd::harness {

harness_session::harness_session(asio::ip::tcp::socket socket, harness_context& ctx)
    : socket_(std::move(socket)),
      ctx_(ctx),
      stream_(ctx.max_payload),
      batches_(ctx.consumers.size()) {
  std::error_code ignored;
  socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
  socket_.non_blocking(true, ignored);
  touched_.reserve(ctx.consumers.size());
}

void harness_session::start() {
  ctx_.connections.fetch_add(1, std::memory_order_relaxed);
  asio::dispatch(socket_.get_executor(), [self = shared_from_this()] { self->do_wait(); });
}

void harness_session::hold() noexcept {
  holds_.fetch_add(1, std::memory_order_relaxed);
}

void harness_session::release() {
  if (holds_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    asio::post(socket_.get_executor(), [self = shared_from_this()] { self->continue_reading(); });
  }
}

void harness_session::end_pass() {
  if (holds_.fetch_sub(1, std::memory_order_acq_rel) == 1) continue_reading();
}

void harness_session::continue_reading() {
  if (closing_) return close();
  stream_.release_if_idle();
  do_wait();
}

void harness_session::do_wait() {
  // No buffer bound to an idle connection: wait for readability, then read.
  socket_.async_wait(asio::ip::tcp::socket::wait_read,
                     [self = shared_from_this()](std::error_code ec) { self->on_readable(ec); });
}

void harness_session::on_readable(std::error_code ec) {
  if (ec) return close();
  hold();  // the pass
  if (ctx_.handoff) return read_for_handoff();
  read_and_route();
}

void harness_session::read_and_route() {
  std::size_t total = 0;
  for (;;) {
    // Without a partial-frame budget (not modelled) prepare() always offers room.
    const auto buf = stream_.prepare();
    std::error_code ec;
    const std::size_t n = socket_.read_some(asio::buffer(buf.data, buf.size), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) break;
    if (ec) {
      closing_ = true;
      break;
    }
    stream_.commit(n);
    total += n;
    if (!route_frames()) {
      closing_ = true;
      break;
    }
    if (n < buf.size || total >= read_budget) break;  // a short read: the socket is drained
  }
  flush();
  end_pass();
}

void harness_session::read_for_handoff() {
  const auto buf = stream_.prepare();
  std::error_code ec;
  const std::size_t n = socket_.read_some(asio::buffer(buf.data, buf.size), ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) return end_pass();
  if (ec) {
    closing_ = true;
    return end_pass();
  }
  stream_.commit(n);
  // Unarmed until the worker is done: one read in flight, so the frames keep their order.
  ctx_.handoff->submit(shared_from_this());
}

void harness_session::route_handed_off() {
  if (!route_frames()) closing_ = true;
  flush();
  release();  // the pass: the next wait is posted back to the I/O thread
}

bool harness_session::route_frames() {
  std::uint32_t refs = 0;
  std::uint64_t frames = 0;
  std::uint64_t unroutable = 0;
  const auto error = stream_.parse([&](const protocol::frame_view& f, const frame_slice& s) {
    ++frames;
    const routing::lookup_result r = ctx_.table->lookup(f.address, scratch_);
    if (!r.matched) ++unroutable;
    for (const routing::consumer_index i : r.consumers) {
      auto& batch = batches_[i];
      if (batch.empty()) touched_.push_back(i);
      batch.push_back(s);
    }
    refs += static_cast<std::uint32_t>(r.consumers.size());
  });
  // One reference per queued slice, taken once for the whole read (all of it is one chunk).
  if (refs) stream_.chunk()->add_refs(refs);
  ctx_.frames_received.fetch_add(frames, std::memory_order_relaxed);
  if (unroutable) ctx_.unroutable.fetch_add(unroutable, std::memory_order_relaxed);
  if (error) {
    ctx_.protocol_errors.fetch_add(1, std::memory_order_relaxed);
    std::fprintf(stderr, "model-harness: supplier protocol error %.*s at byte %llu; closing\n",
                 static_cast<int>(to_string(error.reason).size()), to_string(error.reason).data(),
                 static_cast<unsigned long long>(error.offset));
  }
  return !error;
}

void harness_session::flush() {
  const std::shared_ptr<flow_listener> self = shared_from_this();
  for (const routing::consumer_index i : touched_) {
    ctx_.consumers[i]->put(batches_[i], self);
    batches_[i].clear();
  }
  touched_.clear();
}

void harness_session::close() {
  if (!socket_.is_open()) return;
  std::error_code ignored;
  socket_.close(ignored);
  ctx_.connections.fetch_sub(1, std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------------------------

supplier_listener::supplier_listener(const runtime::executor& ex, const net::endpoint& at,
                                     harness_context& ctx)
    : executor_(ex), acceptor_(runtime::make_strand(ex)), ctx_(ctx) {
  const asio::ip::tcp::endpoint ep(asio::ip::make_address(at.host), at.port);
  acceptor_.open(ep.protocol());
  acceptor_.set_option(asio::socket_base::reuse_address(true));
  acceptor_.bind(ep);
  acceptor_.listen(asio::socket_base::max_listen_connections);
}

asio::ip::tcp::endpoint supplier_listener::local_endpoint() const {
  return acceptor_.local_endpoint();
}

void supplier_listener::start() {
  asio::dispatch(acceptor_.get_executor(), [self = shared_from_this()] { self->do_accept(); });
}

void supplier_listener::do_accept() {
  acceptor_.async_accept(runtime::make_strand(executor_),
                         [self = shared_from_this()](std::error_code ec, asio::ip::tcp::socket s) {
                           if (ec == asio::error::operation_aborted) return;
                           if (ec) {
                             // Benchmark code: no retry (the runs open a few connections).
                             std::fprintf(stderr,
                                          "model-harness: accept failed: %s; no longer "
                                          "accepting suppliers\n",
                                          ec.message().c_str());
                             return;
                           }
                           std::make_shared<harness_session>(std::move(s), self->ctx_)->start();
                           self->do_accept();
                         });
}

}  // namespace gatewayd::harness
