// A TLS consumer's settings as loaded: the files the operator named, a digest of their bytes and
// the client context built and checked from them at load (so a reload can tell a rotation).
#pragma once

#include <asio/ssl.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "net/tls_context.hpp"
#include "net/tls_files.hpp"

namespace gatewayd::consumers {

struct consumer_tls {
  net::tls_client_files files;  // absolute paths; server_name filled in (the endpoint's host)
  // SHA-256 over the files' bytes and the server name: equal files with other contents (a
  // certificate rotated in place) compare unequal, and the consumer redials with the new context.
  std::string digest;
  std::shared_ptr<asio::ssl::context> context;      // built from `files`; connections share it
  std::vector<net::tls_certificate_expiry> expiry;  // the CA bundle's and the client certificate's
  std::vector<net::tls_crl_update> crls;            // the crl file's, one per CRL
  bool kernel_tls = true;  // ktls = "auto": the kernel's record layer where the host has it
  bool allow_readable_key = false;  // a key others may read is warned of, not refused
  std::uint32_t line = 0;           // of the tls table in routes.toml, for errors
  std::uint32_t column = 0;

  // The context is made from what the digest names: comparing it would only compare pointers.
  friend bool operator==(const consumer_tls& a, const consumer_tls& b) noexcept {
    return a.files == b.files && a.digest == b.digest && a.kernel_tls == b.kernel_tls &&
           a.allow_readable_key == b.allow_readable_key;
  }
};

}  // namespace gatewayd::consumers
