#include "suppliers/allow_list.hpp"

namespace gatewayd::suppliers {

allow_list::allow_list(std::vector<net::cidr_block> blocks)
    : blocks_(std::make_shared<const std::vector<net::cidr_block>>(std::move(blocks))) {}

bool allow_list::admits(const asio::ip::address& address) const noexcept {
  std::shared_ptr<const std::vector<net::cidr_block>> blocks;
  {
    std::lock_guard lock(mutex_);
    blocks = blocks_;
  }
  if (blocks->empty()) return true;
  if (address.is_v4()) return net::allowed_by(*blocks, address.to_v4().to_bytes());
  return net::allowed_by(*blocks, address.to_v6().to_bytes());
}

void allow_list::replace(std::vector<net::cidr_block> blocks) {
  auto next = std::make_shared<const std::vector<net::cidr_block>>(std::move(blocks));
  std::lock_guard lock(mutex_);
  blocks_.swap(next);  // the old list goes at the return, after the lock
}

}  // namespace gatewayd::suppliers
