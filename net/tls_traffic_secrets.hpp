// The two application traffic secrets of a TLS 1.3 handshake, caught as OpenSSL derives them,
// so that tls13_records can take the connection's records over once the handshake is done.
#pragma once

#include <openssl/ssl.h>

#include <memory>

#include "net/tls13_records.hpp"

namespace gatewayd::net {

// OpenSSL 3.0 has no call that returns them: its key log callback is the one public way out
// (what SSLKEYLOGFILE uses). Here they are never written anywhere, and are wiped with this.
struct tls_traffic_secrets {
  traffic_secret client;
  traffic_secret server;

  // Once per context, when it is made: connections on `ctx` report their secrets to the
  // tls_traffic_secrets that watches them (none: nothing is kept).
  static void install(SSL_CTX* ctx) noexcept;
  // This object catches `ssl`'s secrets from here on; it must outlive the handshake, or call
  // stop_watching first.
  void watch(SSL* ssl) noexcept;
  static void stop_watching(SSL* ssl) noexcept;
};

// Records for `ssl`, whose handshake has just succeeded with `secrets` caught: null when
// OpenSSL must keep them (TLS 1.2 or another suite; OpenSSL holds bytes it read past the
// handshake; a server that sent session tickets, which used its write key already).
std::unique_ptr<tls13_records> take_over_records(SSL* ssl, const tls_traffic_secrets& secrets,
                                                 bool server);

}  // namespace gatewayd::net
