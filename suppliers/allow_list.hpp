// The source networks suppliers may connect from (gateway.allow), replaceable by a reload
// while the acceptor reads it from another thread.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <memory>
#include <vector>

#include "net/cidr_block.hpp"

namespace gatewayd::suppliers {

class allow_list {
 public:
  explicit allow_list(std::vector<net::cidr_block> blocks);

  // True when `address` is in one of the blocks, or the list is empty (everyone). An IPv4
  // peer on a dual-stack listener (::ffff:a.b.c.d) is matched against the IPv4 blocks.
  bool admits(const asio::ip::address& address) const noexcept;
  // Connections accepted from here on are checked against `blocks`.
  void replace(std::vector<net::cidr_block> blocks);

 private:
  std::atomic<std::shared_ptr<const std::vector<net::cidr_block>>> blocks_;
};

}  // namespace gatewayd::suppliers
