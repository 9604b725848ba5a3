// gateway-peer's command line: the subcommands' options, their parsing and their --help.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "net/endpoint.hpp"
#include "tools/gateway_peer/tls_options.hpp"

namespace gatewayd::tools {

// Exit codes of gateway-peer (also in its --help and in docs/benchmarks.md).
inline constexpr int exit_ok = 0;
inline constexpr int exit_runtime_error = 1;  // cannot connect/listen, connection lost
inline constexpr int exit_usage = 2;          // bad arguments
// recv: corrupt frames, or --expect not reached; send --confirm: frames left unconfirmed.
inline constexpr int exit_verify_failed = 3;

struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct send_options {
  std::vector<net::endpoint> to;       // gateways (or balancers): a lost one moves to the next
  std::vector<std::string> addresses;  // frame i goes to addresses[i mod k]: stream i mod k
  std::uint32_t spread = 0;  // > 0: each address gets an 8-digit last token, frame i's i mod spread
  std::size_t size = 128;    // payload bytes, at least traffic::header_size
  double rate = 0;           // frames/s over all connections; 0 = as fast as possible
  std::uint64_t count = 0;   // frames over all connections; 0 = no limit
  double duration = 0;       // seconds; 0 = no limit
  unsigned connections = 1;
  bool reconnect = false;  // also implied by several --to addresses
  bool json = false;
  tls_options tls;  // --tls-ca (and optionally --tls-cert/--tls-key): TLS to the gateway
  // --confirm: CONFIRM frames, at most `window` unconfirmed per connection, resent on the next
  // connection; at the end up to `confirm_wait` seconds for the last confirms.
  bool confirm = false;
  std::size_t window = 10000;
  double confirm_wait = 5;
  // --confirm-deadline: seconds a connection with frames unconfirmed may go without any of them
  // settling before it is dropped and the next address dialled (a gateway whose host vanished
  // sends no RST: without it the sender would wait for the kernel's ~15 minutes). 0 = none.
  double confirm_deadline = 0;
};

struct recv_options {
  net::endpoint listen;
  double stall_after = -1;  // seconds after the first frame; < 0 = never
  double rate = 0;          // --rate N: read at most N frames a second; 0 = as fast as it can
  bool print = false;
  double duration = 0;       // seconds; 0 = until SIGINT/SIGTERM (or --expect)
  std::uint64_t expect = 0;  // exit once this many frames arrived; 0 = no such goal
  bool json = false;
  bool ack = false;           // --ack: `ack N` back after each read (an `ack = true` consumer)
  bool one_consumer = false;  // --one-consumer: every connection's frames checked as one copy
  // --seen-log FILE: each frame's (sender, stream, sequence) appended as it counts as taken (at
  // its ack with --ack), so that a receiver SIGKILLed mid-run leaves what it had taken behind.
  std::string seen_log;
  tls_options tls;  // --tls-cert/--tls-key: the gateway's consumer leg speaks TLS to us
};

struct top_options {
  net::endpoint metrics;  // the gateway's [metrics] listen
  double interval = 1;    // seconds between two looks
  bool once = false;      // print one look (two reads, `interval` apart, for the rates) and exit
};

// Throw usage_error with a message that names the offending option.
send_options parse_send(const std::vector<std::string>& args);
recv_options parse_recv(const std::vector<std::string>& args);
top_options parse_top(const std::vector<std::string>& args);

extern const char* const main_help;
extern const char* const send_help;
extern const char* const recv_help;
extern const char* const top_help;

}  // namespace gatewayd::tools
