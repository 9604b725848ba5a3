#include "runtime/execution_model.hpp"

#include "runtime/asio_thread_pool.hpp"
#include "runtime/half_sync_half_async.hpp"

namespace gatewayd::runtime {
namespace {

class leader_followers_model final : public execution_model {
 public:
  leader_followers_model(asio::io_context& ioc, unsigned threads, latency_histogram& latency,
                         std::chrono::microseconds idle_poll)
      : pool_(ioc, threads, latency, idle_poll) {}
  void start() override { pool_.start(); }
  void stop() override { pool_.stop(); }
  void join() override { pool_.join(); }
  role_counts roles() const override { return pool_.roles(); }
  unsigned size() const noexcept override { return pool_.size(); }
  std::uint64_t saturated() const override { return pool_.promotions_without_follower(); }
  std::uint64_t taken_back() const override { return pool_.leadership_taken_back(); }

 private:
  lf_pool pool_;
};

}  // namespace

std::unique_ptr<execution_model> make_execution_model(concurrency_model which,
                                                      asio::io_context& ioc, unsigned threads,
                                                      latency_histogram& promotion_latency,
                                                      std::chrono::microseconds idle_poll) {
  switch (which) {
    case concurrency_model::half_sync_half_async:
      return std::make_unique<half_sync_half_async>(ioc, threads);
    case concurrency_model::asio_threads:
      return std::make_unique<asio_thread_pool>(ioc, threads);
    case concurrency_model::leader_followers:
      break;
  }
  return std::make_unique<leader_followers_model>(ioc, threads, promotion_latency, idle_poll);
}

}  // namespace gatewayd::runtime
