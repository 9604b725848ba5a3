#include "runtime/asio_thread_pool.hpp"

#include "runtime/thread_count.hpp"

namespace gatewayd::runtime {

asio_thread_pool::asio_thread_pool(asio::io_context& ioc, unsigned threads)
    : ioc_(ioc), thread_count_(thread_count(threads)) {}

asio_thread_pool::~asio_thread_pool() {
  stop();
  join();
}

void asio_thread_pool::start() {
  threads_.reserve(thread_count_);
  for (unsigned i = 0; i < thread_count_; ++i)
    threads_.emplace_back([this] { ioc_.run(); });
}

void asio_thread_pool::stop() {
  ioc_.stop();
}

void asio_thread_pool::join() {
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

}  // namespace gatewayd::runtime
