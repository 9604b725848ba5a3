#include "gateway/asio_thread_pool.hpp"

#include <algorithm>

namespace gatewayd::gateway {

asio_thread_pool::asio_thread_pool(asio::io_context& ioc, unsigned threads)
    : ioc_(ioc),
      thread_count_(threads ? threads : std::max(1u, std::thread::hardware_concurrency())) {}

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

}  // namespace gatewayd::gateway
