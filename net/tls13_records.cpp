#include "net/tls13_records.hpp"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/kdf.h>

#include <asio/error.hpp>
#include <asio/ssl/error.hpp>

#include <algorithm>
#include <cstring>

namespace gatewayd::net {

namespace {

constexpr unsigned char content_alert = 21;
constexpr unsigned char content_handshake = 22;
constexpr unsigned char content_application_data = 23;
constexpr unsigned char message_new_session_ticket = 4;
constexpr unsigned char message_key_update = 24;
// RFC 8446 5.5: AES-GCM may protect 2^24.5 full records under one key; we move on well before.
constexpr std::uint64_t records_per_key = std::uint64_t{1} << 24;
// Post-handshake messages we wait for the rest of (a NewSessionTicket is a few hundred bytes).
constexpr std::size_t max_handshake_message = 64 * 1024;
// KeyUpdates without application data between them before we call it an attack (each costs
// two key derivations, and an answer when it asks for one), far more than any peer needs.
constexpr unsigned max_key_updates_in_a_row = 32;

std::error_code ssl_error(int reason) {
  return {static_cast<int>(ERR_PACK(ERR_LIB_SSL, 0, reason)), asio::error::get_ssl_category()};
}

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// HKDF-Expand-Label(secret, label, "", n) of RFC 8446 7.1.
bool expand_label(const char* digest, const traffic_secret& secret, std::string_view label,
                  unsigned char* out, std::size_t n) {
  static EVP_KDF* const hkdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  if (!hkdf) return false;
  constexpr std::string_view prefix = "tls13 ";
  unsigned char info[2 + 1 + 6 + 16 + 1];
  std::size_t at = 0;
  info[at++] = static_cast<unsigned char>(n >> 8);
  info[at++] = static_cast<unsigned char>(n);
  info[at++] = static_cast<unsigned char>(prefix.size() + label.size());
  std::memcpy(info + at, prefix.data(), prefix.size());
  at += prefix.size();
  std::memcpy(info + at, label.data(), label.size());
  at += label.size();
  info[at++] = 0;  // no context
  EVP_KDF_CTX* kdf = EVP_KDF_CTX_new(hkdf);
  if (!kdf) return false;
  int mode = EVP_KDF_HKDF_MODE_EXPAND_ONLY;
  unsigned char key[48];
  std::memcpy(key, secret.bytes.data(), secret.size);
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, const_cast<char*>(digest), 0),
      OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, key, secret.size),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info, at), OSSL_PARAM_construct_end()};
  const bool ok = EVP_KDF_derive(kdf, out, n, params) == 1;
  OPENSSL_cleanse(key, sizeof key);
  EVP_KDF_CTX_free(kdf);
  return ok;
}

}  // namespace

traffic_secret::~traffic_secret() {
  OPENSSL_cleanse(bytes.data(), bytes.size());
}

bool traffic_secret::assign_hex(std::string_view hex) noexcept {
  size = 0;
  if (hex.size() != 64 && hex.size() != 96) return false;
  for (std::size_t i = 0; i < hex.size() / 2; ++i) {
    const int hi = hex_value(hex[2 * i]);
    const int lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      OPENSSL_cleanse(bytes.data(), bytes.size());
      return false;
    }
    bytes[i] = static_cast<unsigned char>(hi << 4 | lo);
  }
  size = hex.size() / 2;
  return true;
}

std::unique_ptr<tls13_records> tls13_records::make(const SSL* ssl, const traffic_secret& read,
                                                   const traffic_secret& write) {
  const SSL_CIPHER* suite = SSL_get_current_cipher(ssl);
  if (!suite || SSL_version(ssl) != TLS1_3_VERSION) return nullptr;
  // Only a server sends tickets (RFC 8446 4.6.1).
  return make(SSL_CIPHER_get_protocol_id(suite), read, write, !SSL_is_server(ssl));
}

std::unique_ptr<tls13_records> tls13_records::make(std::uint16_t suite, const traffic_secret& read,
                                                   const traffic_secret& write,
                                                   bool tickets_allowed) {
  const EVP_CIPHER* cipher = nullptr;
  const char* digest = "SHA256";
  std::size_t secret_size = 32;
  switch (suite) {
    case 0x1301:
      cipher = EVP_aes_128_gcm();
      break;
    case 0x1302:
      cipher = EVP_aes_256_gcm();
      digest = "SHA384";
      secret_size = 48;
      break;
    case 0x1303:
      cipher = EVP_chacha20_poly1305();
      break;
    default:
      return nullptr;
  }
  if (read.size != secret_size || write.size != secret_size) return nullptr;
  std::unique_ptr<tls13_records> records(new tls13_records(cipher, digest, tickets_allowed));
  for (auto [d, s] : {std::pair{&records->read_, &read}, std::pair{&records->write_, &write}}) {
    std::memcpy(d->secret.bytes.data(), s->bytes.data(), s->size);
    d->secret.size = s->size;
  }
  if (!records->rekey(records->read_) || !records->rekey(records->write_)) return nullptr;
  return records;
}

tls13_records::~tls13_records() {
  EVP_CIPHER_CTX_free(read_.cipher);
  EVP_CIPHER_CTX_free(write_.cipher);
}

bool tls13_records::rekey(direction& d) {
  const int key_size = EVP_CIPHER_get_key_length(cipher_);
  unsigned char key[32];
  if (key_size <= 0 || key_size > static_cast<int>(sizeof key)) return false;
  if (!expand_label(digest_, d.secret, "key", key, static_cast<std::size_t>(key_size)) ||
      !expand_label(digest_, d.secret, "iv", d.iv.data(), d.iv.size())) {
    return false;
  }
  if (!d.cipher) d.cipher = EVP_CIPHER_CTX_new();
  const int encrypt = &d == &write_ ? 1 : 0;
  const bool ok =
      d.cipher && EVP_CipherInit_ex(d.cipher, cipher_, nullptr, key, nullptr, encrypt) == 1;
  OPENSSL_cleanse(key, sizeof key);
  d.sequence = 0;
  return ok;
}

bool tls13_records::next_key(direction& d) {
  traffic_secret next;
  if (!expand_label(digest_, d.secret, "traffic upd", next.bytes.data(), d.secret.size)) {
    return false;
  }
  std::memcpy(d.secret.bytes.data(), next.bytes.data(), d.secret.size);
  return rekey(d);
}

void tls13_records::nonce(const direction& d, unsigned char out[12]) const noexcept {
  std::memcpy(out, d.iv.data(), 12);
  for (int i = 0; i < 8; ++i)
    out[11 - i] ^= static_cast<unsigned char>(d.sequence >> (8 * i));
}

std::size_t tls13_records::seal(std::span<const asio::const_buffer> plain, byte_buffer& out,
                                std::error_code& ec) {
  if (key_update_owed_) seal_owed_key_update(out, ec);
  std::size_t total = 0;
  for (const asio::const_buffer& piece : plain)
    total += piece.size();
  std::size_t piece = 0;
  std::size_t offset = 0;
  for (std::size_t left = total; left && !ec;) {
    const std::size_t n = std::min(left, max_plaintext);
    seal_record(content_application_data, plain, piece, offset, n, out, ec);
    left -= n;
    if (!ec && write_.sequence >= records_per_key) seal_key_update(false, out, ec);
  }
  return total;
}

void tls13_records::seal_close_notify(byte_buffer& out, std::error_code& ec) {
  static constexpr char close_notify[] = {1, 0};  // warning, close_notify
  seal_one(content_alert, asio::buffer(close_notify), out, ec);
}

void tls13_records::seal_one(unsigned char type, asio::const_buffer content, byte_buffer& out,
                             std::error_code& ec) {
  if (content.size() > max_plaintext) {
    ec = ssl_error(SSL_R_DATA_LENGTH_TOO_LONG);
    return;
  }
  std::size_t piece = 0;
  std::size_t offset = 0;
  seal_record(type, {&content, 1}, piece, offset, content.size(), out, ec);
}

void tls13_records::seal_owed_key_update(byte_buffer& out, std::error_code& ec) {
  if (!key_update_owed_) return;
  seal_key_update(false, out, ec);
  if (!ec) key_update_owed_ = false;
}

void tls13_records::seal_key_update(bool request_peer, byte_buffer& out, std::error_code& ec) {
  const char message[] = {static_cast<char>(message_key_update), 0, 0, 1,
                          static_cast<char>(request_peer ? 1 : 0)};
  seal_one(content_handshake, asio::buffer(message), out, ec);
  if (!ec && !next_key(write_)) ec = ssl_error(SSL_R_BAD_KEY_UPDATE);
}

void tls13_records::seal_record(unsigned char type, std::span<const asio::const_buffer> content,
                                std::size_t& piece, std::size_t& offset, std::size_t size,
                                byte_buffer& out, std::error_code& ec) {
  const std::size_t length = size + 1 + tag_size;
  auto* record = reinterpret_cast<unsigned char*>(out.extend(header_size + length));
  record[0] = content_application_data;  // the outer type of every protected record
  record[1] = 3;
  record[2] = 3;
  record[3] = static_cast<unsigned char>(length >> 8);
  record[4] = static_cast<unsigned char>(length);
  unsigned char iv[12];
  nonce(write_, iv);
  EVP_CIPHER_CTX* c = write_.cipher;
  int n = 0;
  bool ok = EVP_EncryptInit_ex(c, nullptr, nullptr, nullptr, iv) == 1 &&
            EVP_EncryptUpdate(c, nullptr, &n, record, header_size) == 1;
  unsigned char* at = record + header_size;
  for (std::size_t left = size; ok && left;) {
    const asio::const_buffer& p = content[piece];
    const std::size_t take = std::min(p.size() - offset, left);
    ok = EVP_EncryptUpdate(c, at, &n, static_cast<const unsigned char*>(p.data()) + offset,
                           static_cast<int>(take)) == 1;
    at += n;
    left -= take;
    offset += take;
    if (offset == p.size()) {
      ++piece;
      offset = 0;
    }
  }
  ok = ok && EVP_EncryptUpdate(c, at, &n, &type, 1) == 1;
  at += n;
  ok = ok && EVP_EncryptFinal_ex(c, at, &n) == 1;
  at += n;
  ok = ok && at == record + header_size + size + 1 &&
       EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_GET_TAG, static_cast<int>(tag_size), at) == 1;
  if (!ok) {
    out.shrink(header_size + length);
    ec = {static_cast<int>(ERR_get_error()), asio::error::get_ssl_category()};
    if (!ec) ec = ssl_error(SSL_R_BAD_LENGTH);
    return;
  }
  ++write_.sequence;
}

std::size_t tls13_records::record_size(const char* bytes, std::size_t available,
                                       std::error_code& ec) {
  if (available < header_size) return 0;
  const auto* h = reinterpret_cast<const unsigned char*>(bytes);
  // After the handshake every record is protected, and says so with the same outer type.
  if (h[0] != content_application_data) {
    ec = ssl_error(SSL_R_UNEXPECTED_RECORD);
    return 0;
  }
  if (h[1] != 3 || h[2] != 3) {
    ec = ssl_error(SSL_R_WRONG_VERSION_NUMBER);
    return 0;
  }
  const std::size_t length = std::size_t{h[3]} << 8 | h[4];
  if (length <= tag_size) {
    ec = ssl_error(SSL_R_RECORD_TOO_SMALL);
    return 0;
  }
  if (length > max_ciphertext || length - tag_size > max_inner) {
    ec = ssl_error(SSL_R_ENCRYPTED_LENGTH_TOO_LONG);
    return 0;
  }
  return header_size + length;
}

std::size_t tls13_records::open(const char* record, std::size_t record_size, char* into,
                                std::error_code& ec) {
  const auto* r = reinterpret_cast<const unsigned char*>(record);
  auto* out = reinterpret_cast<unsigned char*>(into);
  const std::size_t inner = record_size - header_size - tag_size;
  if (read_.sequence == ~std::uint64_t{0}) {
    ec = ssl_error(SSL_R_TOO_MANY_KEY_UPDATES);
    return 0;
  }
  unsigned char iv[12];
  nonce(read_, iv);
  EVP_CIPHER_CTX* c = read_.cipher;
  int n = 0;
  int last = 0;
  // The tag is checked before a byte of `into` is used: Final fails on a forged record.
  const bool ok = EVP_DecryptInit_ex(c, nullptr, nullptr, nullptr, iv) == 1 &&
                  EVP_DecryptUpdate(c, nullptr, &n, r, header_size) == 1 &&
                  EVP_DecryptUpdate(c, out, &n, r + header_size, static_cast<int>(inner)) == 1 &&
                  EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_SET_TAG, static_cast<int>(tag_size),
                                      const_cast<unsigned char*>(r + header_size + inner)) == 1 &&
                  EVP_DecryptFinal_ex(c, out + n, &last) == 1 &&
                  static_cast<std::size_t>(n + last) == inner;
  if (!ok) {
    ERR_clear_error();
    ec = ssl_error(SSL_R_DECRYPTION_FAILED_OR_BAD_RECORD_MAC);
    return 0;
  }
  ++read_.sequence;
  std::size_t end = inner;
  while (end && out[end - 1] == 0)
    --end;  // padding
  if (!end) {
    ec = ssl_error(SSL_R_UNEXPECTED_MESSAGE);  // no content type: RFC 8446 5.4
    return 0;
  }
  const unsigned char type = out[end - 1];
  const std::size_t size = end - 1;
  switch (type) {
    case content_application_data:
      // Handshake messages may not be interleaved with other records (RFC 8446 5.1).
      if (!handshake_in_.empty()) ec = ssl_error(SSL_R_UNEXPECTED_RECORD);
      if (size) key_updates_in_a_row_ = 0;
      return ec ? 0 : size;
    case content_handshake:
      on_handshake_bytes(into, size, ec);
      return 0;
    case content_alert:
      on_alert(into, size, ec);
      return 0;
    default:
      ec = ssl_error(SSL_R_UNEXPECTED_RECORD);
      return 0;
  }
}

void tls13_records::on_handshake_bytes(const char* bytes, std::size_t n, std::error_code& ec) {
  if (!n || handshake_in_.size() + n > max_handshake_message) {
    ec = ssl_error(n ? SSL_R_EXCESSIVE_MESSAGE_SIZE : SSL_R_BAD_LENGTH);
    return;
  }
  handshake_in_.append(bytes, n);
  std::size_t at = 0;
  while (handshake_in_.size() - at >= 4) {
    const auto* m = reinterpret_cast<const unsigned char*>(handshake_in_.data() + at);
    const std::size_t length = std::size_t{m[1]} << 16 | std::size_t{m[2]} << 8 | m[3];
    if (handshake_in_.size() - at < 4 + length) break;
    if (m[0] == message_new_session_ticket && tickets_allowed_) {
      // No session cache here: a ticket has nothing to resume.
    } else if (m[0] == message_key_update && length == 1 && m[4] <= 1) {
      // The key changes after this record; nothing may follow it in the record (RFC 8446 5.1).
      if (handshake_in_.size() - at != 5 || ++key_updates_in_a_row_ > max_key_updates_in_a_row ||
          !next_key(read_)) {
        ec = ssl_error(SSL_R_BAD_KEY_UPDATE);
        return;
      }
      if (m[4] == 1) key_update_owed_ = true;
    } else {
      ec = ssl_error(m[0] == message_key_update ? SSL_R_BAD_KEY_UPDATE : SSL_R_UNEXPECTED_MESSAGE);
      return;
    }
    at += 4 + length;
  }
  handshake_in_.erase(0, at);
}

void tls13_records::on_alert(const char* bytes, std::size_t n, std::error_code& ec) {
  if (n != 2 || !handshake_in_.empty()) {
    ec = ssl_error(SSL_R_INVALID_ALERT);
    return;
  }
  const int description = static_cast<unsigned char>(bytes[1]);
  if (description == SSL_AD_CLOSE_NOTIFY) {
    ec = asio::error::eof;
  } else if (description != SSL_AD_USER_CANCELLED) {  // a close_notify follows that one
    ec = ssl_error(SSL_AD_REASON_OFFSET + description);
  }
}

}  // namespace gatewayd::net
