#include "gateway/execution_model.hpp"

#include "gateway/asio_thread_pool.hpp"
#include "gateway/half_sync_half_async.hpp"

namespace gatewayd::gateway {
namespace {

// The gateway's lf_pool seen through the common interface.
class leader_followers_model final : public execution_model {
 public:
  explicit leader_followers_model(lf_pool& pool) : pool_(pool) {}
  void start() override { pool_.start(); }
  void stop() override { pool_.stop(); }
  void join() override { pool_.join(); }
  role_counts roles() const override { return pool_.roles(); }
  unsigned size() const noexcept override { return pool_.size(); }

 private:
  lf_pool& pool_;
};

}  // namespace

std::unique_ptr<execution_model> make_execution_model(concurrency_model which,
                                                      asio::io_context& ioc, lf_pool& pool,
                                                      unsigned threads) {
  switch (which) {
    case concurrency_model::half_sync_half_async:
      return std::make_unique<half_sync_half_async>(ioc, threads);
    case concurrency_model::asio_threads:
      return std::make_unique<asio_thread_pool>(ioc, threads);
    case concurrency_model::leader_followers:
      break;
  }
  return std::make_unique<leader_followers_model>(pool);
}

}  // namespace gatewayd::gateway
