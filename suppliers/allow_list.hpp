// The source networks suppliers may connect from (gateway.allow), replaceable by a reload
// while the acceptor reads it from another thread.
#pragma once

#include <asio.hpp>
#include <memory>
#include <mutex>
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
  // A pointer copy per accepted connection and a swap per reload, under the lock:
  // std::atomic<std::shared_ptr> would do, but libstdc++ 12's load() lets its lock bit go with
  // a relaxed store, a data race with the next store() by the standard (TSan reports it on
  // confirm_anchor's weak_ptr: google/sanitizers#1558).
  mutable std::mutex mutex_;
  std::shared_ptr<const std::vector<net::cidr_block>> blocks_;
};

}  // namespace gatewayd::suppliers
