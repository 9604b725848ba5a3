// Raw supplier sockets for the hostile-peer tests: connections that send arbitrary bytes (bad
// headers, trickles, partial frames) and notice the gateway closing them.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace gatewayd::test {

// Raises this process's open-file limit to its hard limit (the daemon, a child, inherits it).
void raise_fd_limit();

// A blocking connection to 127.0.0.1:port, or -1.
int dial(unsigned short port);
// Writes all of `bytes`; false when the gateway closed the connection first.
bool send_all(int fd, const std::string& bytes);
// True when the gateway has closed `fd` (EOF or reset), checked without waiting.
bool is_closed(int fd);
bool all_closed_within(const std::vector<int>& fds, std::chrono::milliseconds timeout);
void close_all(std::vector<int>& fds);

// A GWP/1 header announcing an address and a payload of these lengths (the bytes themselves
// are up to the caller: a header may announce more than it will ever send).
std::string frame_header(std::uint16_t address_length, std::uint32_t payload_length);

}  // namespace gatewayd::test
