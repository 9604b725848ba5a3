// TLS 1.3 record protection (RFC 8446 section 5) for a connection whose handshake OpenSSL did:
// seals application data straight from where it lies and opens records straight into the
// reader's buffer, so neither side copies a byte the cipher does not already pass over.
#pragma once

#include <openssl/evp.h>
#include <openssl/ssl.h>

#include <array>
#include <asio/buffer.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <system_error>

#include "net/byte_buffer.hpp"

namespace gatewayd::net {

// One direction's application traffic secret, as OpenSSL's key log reports it.
struct traffic_secret {
  std::array<unsigned char, 48> bytes{};  // SHA-384's size, the largest of the three suites
  std::size_t size = 0;

  traffic_secret() = default;
  traffic_secret(const traffic_secret&) = delete;
  traffic_secret& operator=(const traffic_secret&) = delete;
  ~traffic_secret();
  // From the hex of a key log line; false (and empty) if it is not a 32 or 48 byte secret.
  bool assign_hex(std::string_view hex) noexcept;
};

// Why OpenSSL's own record layer does not do this: SSL_write copies the plaintext into its
// record buffer before it encrypts it there, our output BIO copies the records out again, and
// SSL_read decrypts in OpenSSL's buffer and copies the result out (each ~3 % of gatewayd's
// CPU in S1 over TLS, docs/benchmarks-tls.md). Kernel TLS would do what this class does, in
// the kernel, but this machine's kernel has no CONFIG_TLS. The handshake, certificates and
// every TLS 1.2 connection stay OpenSSL's; this class takes over only the data phase of
// TLS 1.3 with one of its three AEAD suites, after a handshake that left nothing buffered.
//
// Not thread-safe; the owner (tls_channel) drives both directions on one strand.
class tls13_records {
 public:
  static constexpr std::size_t header_size = 5;
  static constexpr std::size_t tag_size = 16;
  static constexpr std::size_t max_plaintext = 16384;
  // The inner plaintext: content, its type, padding (RFC 8446 5.4: at most 2^14 + 1 bytes).
  static constexpr std::size_t max_inner = max_plaintext + 1;
  // What the length field of a record may say (RFC 8446 5.2).
  static constexpr std::size_t max_ciphertext = max_plaintext + 256;

  // The suites TLS 1.3 has and we seal with; null for any other (then OpenSSL keeps the
  // connection), or if OpenSSL cannot make the keys.
  static std::unique_ptr<tls13_records> make(const SSL* ssl, const traffic_secret& read,
                                             const traffic_secret& write);
  // As above for a suite by its TLS 1.3 code point (0x1301, 0x1302, 0x1303); a client's records
  // take the server's NewSessionTickets (and skip them), a server's refuse them.
  static std::unique_ptr<tls13_records> make(std::uint16_t suite, const traffic_secret& read,
                                             const traffic_secret& write, bool tickets_allowed);
  ~tls13_records();
  tls13_records(const tls13_records&) = delete;
  tls13_records& operator=(const tls13_records&) = delete;

  // Appends the records that carry `plain` in order (application data, 16 KiB each, one
  // encryption pass from the pieces into `out`). A KeyUpdate we owe goes first. Returns the
  // pieces' total size.
  std::size_t seal(std::span<const asio::const_buffer> plain, byte_buffer& out,
                   std::error_code& ec);
  // Appends an alert record: close_notify.
  void seal_close_notify(byte_buffer& out, std::error_code& ec);
  // Appends one record of content type `type` (RFC 8446 5.1: 21 alert, 22 handshake,
  // 23 application data) around `content` (at most max_plaintext bytes), as it is: what a peer
  // may send, for the tests and the fuzz target to speak as one. The rest of this class uses it.
  void seal_one(unsigned char type, asio::const_buffer content, byte_buffer& out,
                std::error_code& ec);
  // True when the peer asked for our KeyUpdate and it has not gone out yet.
  bool key_update_owed() const noexcept { return key_update_owed_; }
  // Appends the KeyUpdate we owe (if any), and from here on seals with the next key.
  void seal_owed_key_update(byte_buffer& out, std::error_code& ec);

  // The length of the record starting at `bytes` (header included), once the header is there;
  // 0 while fewer than header_size bytes are. A length over max_ciphertext is an error.
  static std::size_t record_size(const char* bytes, std::size_t available, std::error_code& ec);

  // Opens one whole record (`record_size` bytes from the header on) into `into`, which has room
  // for record_size - header_size - tag_size bytes. Returns how many of them are application
  // data; control records (post-handshake messages, alerts) are handled here and give 0. `ec`:
  // eof at the peer's close_notify, else an error in Asio's ssl category (bad record MAC, an
  // alert, a malformed record); then nothing in `into` is to be used.
  std::size_t open(const char* record, std::size_t record_size, char* into, std::error_code& ec);

 private:
  struct direction {
    EVP_CIPHER_CTX* cipher = nullptr;
    traffic_secret secret;
    std::array<unsigned char, 12> iv{};
    std::uint64_t sequence = 0;
  };

  tls13_records(const EVP_CIPHER* cipher, const char* digest, bool tickets_allowed) noexcept
      : cipher_(cipher), digest_(digest), tickets_allowed_(tickets_allowed) {}
  // (Re)keys `d` from its secret: key and IV by HKDF-Expand-Label, sequence back to 0.
  bool rekey(direction& d);
  // The next secret of a KeyUpdate ("traffic upd"), then rekey.
  bool next_key(direction& d);
  void nonce(const direction& d, unsigned char out[12]) const noexcept;
  // One record of `type` around the next `size` bytes of `content`, from piece `piece` at
  // `offset` on (both advanced past them); appended to `out`.
  void seal_record(unsigned char type, std::span<const asio::const_buffer> content,
                   std::size_t& piece, std::size_t& offset, std::size_t size, byte_buffer& out,
                   std::error_code& ec);
  // A KeyUpdate message (RFC 8446 4.6.3), then our next key.
  void seal_key_update(bool request_peer, byte_buffer& out, std::error_code& ec);
  void on_handshake_bytes(const char* bytes, std::size_t n, std::error_code& ec);
  void on_alert(const char* bytes, std::size_t n, std::error_code& ec);

  const EVP_CIPHER* cipher_;
  const char* digest_;
  direction read_;
  direction write_;
  bool tickets_allowed_;
  std::string handshake_in_;  // a post-handshake message split across records
  bool key_update_owed_ = false;
  unsigned key_updates_in_a_row_ = 0;
};

}  // namespace gatewayd::net
