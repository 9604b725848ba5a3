// Whether this host's kernel has the TLS upper-layer protocol, asked the way a connection asks it.
#pragma once

#include <cstdint>
#include <string_view>

namespace gatewayd::net {

enum class kernel_tls_state : std::uint8_t {
  loaded,      // a TCP connection can take the "tls" ULP: OpenSSL may hand it the records
  not_loaded,  // the kernel answered ENOENT: no such ULP (`modprobe tls` adds it)
  unknown,     // the probe could not ask (no loopback socket, another error)
};
std::string_view to_string(kernel_tls_state s) noexcept;

// Sets TCP_ULP "tls" on a throwaway connected loopback socket: what OpenSSL does to every
// connection it offloads. Unlike reading /proc/sys/net/ipv4/tcp_available_ulp, it works where
// /proc/sys is hidden (the packaged unit's ProcSubset=pid). Never loads the module itself
// unless the process may (CAP_NET_ADMIN, which the unit does not grant). A few syscalls: for
// start-up and reloads, not per connection.
kernel_tls_state probe_kernel_tls() noexcept;

}  // namespace gatewayd::net
