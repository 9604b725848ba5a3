// A hostile TLS 1.3 client's pen: after OpenSSL's handshake, records the client's OpenSSL would
// never send (empty application data, warning alerts), sealed with its own key so that the
// gateway's OpenSSL opens them. Test-only: the product has no record layer of its own.
#pragma once

#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/ssl.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace gatewayd::test {

// Install on the client's SSL_CTX before its handshake (SSL_CTX_set_keylog_callback with
// tls_record_forger::keylog) and restrict it to TLS_AES_128_GCM_SHA256. The forger then seals
// records as the client's next ones (sequence 0 on, as no application data was sent yet).
class tls_record_forger {
 public:
  static void keylog(const SSL* ssl, const char* line) {
    auto* self = static_cast<tls_record_forger*>(SSL_get_app_data(ssl));
    const std::string_view l(line);
    constexpr std::string_view label = "CLIENT_TRAFFIC_SECRET_0 ";
    if (!self || l.substr(0, label.size()) != label) return;
    // "LABEL client_random secret": the secret is the last field, in hex.
    self->secret_hex_ = std::string(l.substr(l.rfind(' ') + 1));
  }

  // Before SSL_connect: `ssl` reports its secret here.
  void watch(SSL* ssl) { SSL_set_app_data(ssl, this); }
  bool ready() const { return secret_hex_.size() == 64; }

  // One whole record (header included) of `type` carrying `content`, under the client's key:
  // the next in sequence, so records go on the wire in the order they were sealed.
  std::string seal(std::uint8_t type, std::string_view content) {
    if (!keyed_) derive();
    std::string inner(content);
    inner += static_cast<char>(type);
    const std::size_t length = inner.size() + 16;
    std::string record = {0x17, 0x03, 0x03, static_cast<char>(length >> 8),
                          static_cast<char>(length & 0xff)};
    std::array<unsigned char, 12> nonce = iv_;
    for (int i = 0; i < 8; ++i)
      nonce[11 - i] ^= static_cast<unsigned char>(sequence_ >> (8 * i));
    ++sequence_;
    EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
    EVP_EncryptInit_ex(ctx, EVP_aes_128_gcm(), nullptr, key_.data(), nonce.data());
    int n = 0;
    EVP_EncryptUpdate(ctx, nullptr, &n, reinterpret_cast<const unsigned char*>(record.data()), 5);
    std::string sealed(inner.size() + 16, '\0');
    auto* out = reinterpret_cast<unsigned char*>(sealed.data());
    EVP_EncryptUpdate(ctx, out, &n, reinterpret_cast<const unsigned char*>(inner.data()),
                      static_cast<int>(inner.size()));
    EVP_EncryptFinal_ex(ctx, out + n, &n);
    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, out + inner.size());
    EVP_CIPHER_CTX_free(ctx);
    return record + sealed;
  }

  // TLS content types.
  static constexpr std::uint8_t alert = 21, application_data = 23;

 private:
  // RFC 8446 7.1: HKDF-Expand-Label(secret, label, "", length) with SHA-256.
  template <std::size_t N>
  static std::array<unsigned char, N> expand_label(const std::array<unsigned char, 32>& secret,
                                                   std::string_view label) {
    std::string info = {0, static_cast<char>(N), static_cast<char>(6 + label.size())};
    info += "tls13 ";
    info += label;
    info += '\0';
    std::array<unsigned char, N> out{};
    EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
    EVP_KDF_CTX* ctx = EVP_KDF_CTX_new(kdf);
    int mode = EVP_KDF_HKDF_MODE_EXPAND_ONLY;
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_int("mode", &mode),
        OSSL_PARAM_construct_utf8_string("digest", digest, 0),
        OSSL_PARAM_construct_octet_string("key", const_cast<unsigned char*>(secret.data()), 32),
        OSSL_PARAM_construct_octet_string("info", info.data(), info.size()),
        OSSL_PARAM_construct_end()};
    EVP_KDF_derive(ctx, out.data(), N, params);
    EVP_KDF_CTX_free(ctx);
    EVP_KDF_free(kdf);
    return out;
  }

  void derive() {
    std::array<unsigned char, 32> secret{};
    for (std::size_t i = 0; i < 32; ++i)
      secret[i] = static_cast<unsigned char>(std::stoi(secret_hex_.substr(2 * i, 2), nullptr, 16));
    key_ = expand_label<16>(secret, "key");
    iv_ = expand_label<12>(secret, "iv");
    keyed_ = true;
  }

  std::string secret_hex_;
  bool keyed_ = false;
  std::array<unsigned char, 16> key_{};
  std::array<unsigned char, 12> iv_{};
  std::uint64_t sequence_ = 0;
};

}  // namespace gatewayd::test
