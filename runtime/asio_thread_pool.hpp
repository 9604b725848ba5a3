// The plain Asio model: N threads all call io_context::run() and take whatever handler is ready
// (no leader, no hand-off; Asio's own scheduler arbitrates).
#pragma once

#include <asio.hpp>
#include <thread>
#include <vector>

#include "runtime/execution_model.hpp"

namespace gatewayd::runtime {

class asio_thread_pool final : public execution_model {
 public:
  asio_thread_pool(asio::io_context& ioc, unsigned threads);
  ~asio_thread_pool() override;

  void start() override;
  void stop() override;
  void join() override;
  role_counts roles() const override { return {}; }
  unsigned size() const noexcept override { return thread_count_; }

 private:
  asio::io_context& ioc_;
  const unsigned thread_count_;
  std::vector<std::thread> threads_;
};

}  // namespace gatewayd::runtime
