#include "suppliers/tls_read_side.hpp"

namespace gatewayd::suppliers {

asio::socket_base::wait_type tls_read_side::begin_wait() {
  if (wait_ == asio::socket_base::wait_write) {
    deadline_.expires_after(timeout_);
    deadline_.async_wait(
        [self = owner_.keep_alive(), this](std::error_code ec) { on_deadline(ec); });
  }
  return wait_;
}

void tls_read_side::on_deadline(std::error_code ec) {
  // A later wait (for reading) may have begun after this one ended: only a wait for room still
  // out counts, which the owner knows.
  if (ec || wait_ != asio::socket_base::wait_write) return;
  owner_.send_stalled();
}

}  // namespace gatewayd::suppliers
