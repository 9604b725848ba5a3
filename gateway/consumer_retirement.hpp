// Consumers a reload removed: each drains once no read pass still routes by a table that names
// it, and stays exported until the reload after it closed, so its last counts can be scraped.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <asio/steady_timer.hpp>

#include "consumers/consumer.hpp"
#include "runtime/executor.hpp"
#include "suppliers/route_readers.hpp"

namespace gatewayd::gateway {

// Runs on the gateway's control strand, as reloads and the stop do.
class consumer_retirement {
 public:
  explicit consumer_retirement(runtime::strand& control);

  // `c` is not named by the table about to be published: it is exported beside it (to_export)
  // and, once published(), drains for up to `drain_timeout` as soon as the read passes that
  // began by an older table are over (what those route to it is its own).
  void retire(std::shared_ptr<consumers::consumer> c, std::chrono::milliseconds drain_timeout);

  // The table that no longer names the consumers retired since the last call is published as
  // `version`.
  void published(std::uint64_t version);

  // For the next table: those still draining and those closed since the last call (each is
  // exported once more, then forgotten), less any whose name the new table uses again.
  std::vector<std::shared_ptr<consumers::consumer>> to_export(
      const std::vector<std::shared_ptr<consumers::consumer>>& live);

  // The stop: drains not started yet start now, and with `cut_short` every drain ends now.
  void stop(bool cut_short);

  // Where the frame routers announce their passes (any thread): what a retired consumer's
  // drain waits on. Outlives the routers.
  suppliers::route_readers& readers() noexcept { return readers_; }

 private:
  struct retiring {
    std::shared_ptr<consumers::consumer> consumer;
    std::chrono::milliseconds drain_timeout;
    std::uint64_t version = 0;  // the first table without it, once published
    bool draining = false;
    bool closed = false;
  };

  void check_readers();
  void start_drain(const std::shared_ptr<retiring>& r, std::chrono::milliseconds timeout);

  runtime::strand& control_;
  suppliers::route_readers readers_;
  asio::steady_timer poll_;  // while some pass still routes by an older table
  bool polling_ = false;
  std::vector<std::shared_ptr<retiring>> retired_;
};

}  // namespace gatewayd::gateway
