// A supplier's connection to one of several gateways (or balancers): dials the addresses in
// turn, notices a gateway asking it to leave (end-of-file on a connection a supplier only
// writes to: gatewayd's lame-duck stop half-closes it), and moves on to the next address.
#pragma once

#include <sys/types.h>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "net/endpoint.hpp"

namespace gatewayd::traffic {

class supplier_link {
 public:
  // `to`: at least one address; the first dial tries `first` (mod their number) first.
  explicit supplier_link(std::vector<net::endpoint> to, std::size_t first = 0);
  ~supplier_link();
  supplier_link(const supplier_link&) = delete;
  supplier_link& operator=(const supplier_link&) = delete;

  // Dials the addresses once each, from the current one on, until one answers. On failure
  // `ec` is the last address's error.
  bool connect(std::error_code& ec);
  // connect() again every 100 ms until it works; false once `stop` is set or `deadline_ns`
  // (CLOCK_MONOTONIC; 0 = none) passes.
  bool reconnect(const std::atomic<bool>& stop, std::uint64_t deadline_ns);

  bool connected() const noexcept { return fd_ >= 0; }
  const net::endpoint& peer() const noexcept { return to_[at_]; }
  const std::string& local() const noexcept { return local_; }  // our end, "127.0.0.1:4242"
  int native_handle() const noexcept { return fd_; }  // for a TLS layer on top; -1 if none

  // True once the gateway half-closed the connection: it asks us to leave. Costs one poll().
  // An end-of-file that came with a reset is no such request: gone() says so, and the next
  // write fails.
  bool asked_to_leave();
  // The gateway closed its side and reset what we wrote after that: it is gone, not stopping.
  bool gone() const noexcept { return reset_; }
  // Reads what the gateway sent back (a confirm-mode supplier's confirms) without waiting:
  // recv()'s result. An end-of-file (0) is noted as asked_to_leave() notes it.
  ssize_t receive(void* buffer, std::size_t size);
  // Writes all of `bytes` (see traffic::send_all).
  bool send(std::string_view bytes, const std::atomic<bool>& stop, std::error_code& ec);
  // Leaves: half-closes our side too, so the gateway reads everything sent before it closes,
  // then closes. The next dial starts at the next address. After asked_to_leave(), waits (up to
  // 1 s) for the gateway to acknowledge our end: false when it reset the connection instead
  // (it was gone, not stopping: what we wrote since it went is lost).
  bool leave();
  // The connection failed: closes it; the next dial starts at the next address.
  void drop();

 private:
  void close_and_move_on();

  std::vector<net::endpoint> to_;
  std::size_t at_ = 0;
  int fd_ = -1;
  bool end_of_file_ = false;  // the gateway closed its side
  bool reset_ = false;        // and then reset the connection
  std::string local_;
};

}  // namespace gatewayd::traffic
