#include "tests/support/kernel_buffers.hpp"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace gatewayd::test {
namespace {

struct tcp_entry {
  unsigned local_port = 0;
  unsigned remote_port = 0;
  unsigned state = 0;
  std::uint64_t tx_queue = 0;
  std::uint64_t rx_queue = 0;
};

constexpr unsigned established = 1;  // TCP_ESTABLISHED as /proc/net/tcp prints it (hex "01")

// "0100007F:1F4A" -> 0x1F4A (the port, printed in host order).
unsigned port_of(const std::string& address) {
  return static_cast<unsigned>(std::stoul(address.substr(address.find(':') + 1), nullptr, 16));
}

std::vector<tcp_entry> read_tcp_table() {
  std::ifstream in("/proc/net/tcp");
  std::vector<tcp_entry> out;
  std::string line;
  std::getline(in, line);  // the column titles
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues;
    if (!(fields >> slot >> local >> remote >> state >> queues)) continue;
    const auto colon = queues.find(':');
    out.push_back({port_of(local), port_of(remote),
                   static_cast<unsigned>(std::stoul(state, nullptr, 16)),
                   std::stoull(queues.substr(0, colon), nullptr, 16),
                   std::stoull(queues.substr(colon + 1), nullptr, 16)});
  }
  return out;
}

}  // namespace

std::optional<connection_queues> queues_of_connection_to(unsigned short listen_port) {
  const auto table = read_tcp_table();
  const tcp_entry* accepted = nullptr;
  for (const auto& e : table) {
    if (e.state != established || e.local_port != listen_port) continue;
    if (accepted) return std::nullopt;
    accepted = &e;
  }
  if (!accepted) return std::nullopt;
  const tcp_entry* dialer = nullptr;
  for (const auto& e : table) {
    if (e.state != established || e.local_port != accepted->remote_port ||
        e.remote_port != listen_port)
      continue;
    if (dialer) return std::nullopt;
    dialer = &e;
  }
  if (!dialer) return std::nullopt;
  return connection_queues{dialer->tx_queue, accepted->rx_queue, accepted->tx_queue};
}

std::optional<std::uint64_t> bytes_read_by(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/io");
  for (std::string key; in >> key;) {
    std::uint64_t value = 0;
    if (!(in >> value)) break;
    if (key == "rchar:") return value;
  }
  return std::nullopt;
}

}  // namespace gatewayd::test
