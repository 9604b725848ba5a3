// A TLS client on a plain blocking socket with OpenSSL's socket BIO: what it writes reaches the
// socket at once (no engine holding records back), so a test can play a hostile peer: key
// updates without data, and, through its forger, records OpenSSL would never send.
#pragma once

#include <boost/test/unit_test.hpp>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <chrono>
#include <string>
#include <string_view>

#include "tests/support/tls_peers.hpp"
#include "tests/support/tls_record_forger.hpp"

namespace gatewayd::test {

class raw_tls_client {
 public:
  // Presents `cert` (a pki name; empty for none), offers only `suite` (a TLS 1.3 suite, or with
  // `tls12` a TLS 1.2 cipher list, TLS 1.2 only).
  raw_tls_client(const pki& p, const std::string& cert,
                 const char* suite = "TLS_AES_128_GCM_SHA256", bool tls12 = false)
      : ctx_(SSL_CTX_new(TLS_client_method())) {
    SSL_CTX_load_verify_locations(ctx_, p.at("ca.crt").c_str(), nullptr);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    if (!cert.empty()) {
      SSL_CTX_use_certificate_chain_file(ctx_, p.at(cert + ".crt").c_str());
      SSL_CTX_use_PrivateKey_file(ctx_, p.at(cert + ".key").c_str(), SSL_FILETYPE_PEM);
    }
    if (tls12) {
      SSL_CTX_set_max_proto_version(ctx_, TLS1_2_VERSION);
      SSL_CTX_set_cipher_list(ctx_, suite);
    } else {
      SSL_CTX_set_min_proto_version(ctx_, TLS1_3_VERSION);
      SSL_CTX_set_ciphersuites(ctx_, suite);
    }
    SSL_CTX_set_keylog_callback(ctx_, &tls_record_forger::keylog);
  }
  ~raw_tls_client() {
    SSL_free(ssl_);
    SSL_CTX_free(ctx_);
    if (fd_ >= 0) ::close(fd_);
  }
  raw_tls_client(const raw_tls_client&) = delete;
  raw_tls_client& operator=(const raw_tls_client&) = delete;

  // A small receive buffer fills after a few of the gateway's records (the never-reading peer).
  void small_receive_buffer() { receive_buffer_ = 4096; }

  // Connects to 127.0.0.1:`port` and handshakes; false (with why()) when either fails.
  bool connect(unsigned short port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (receive_buffer_)
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer_, sizeof receive_buffer_);
    timeval limit{10, 0};  // a test never hangs on a blocking call
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      why_ = "connect failed";
      return false;
    }
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    forger_.watch(ssl_);
    ERR_clear_error();
    if (SSL_connect(ssl_) != 1) {
      why_ = "handshake failed";
      return false;
    }
    return true;
  }
  const std::string& why() const { return why_; }
  SSL* ssl() const { return ssl_; }
  tls_record_forger& forger() { return forger_; }

  // Application data through OpenSSL; false when the connection refused it.
  bool write(std::string_view data) {
    std::size_t n = 0;
    return SSL_write_ex(ssl_, data.data(), data.size(), &n) == 1 && n == data.size();
  }
  // Appends what one SSL_read gives (waiting up to the socket's 10 s); false at the end of the
  // connection, an error or the time out.
  bool read_some(std::string& out) {
    char buffer[4096];
    std::size_t n = 0;
    if (SSL_read_ex(ssl_, buffer, sizeof buffer, &n) != 1) return false;
    out.append(buffer, n);
    return true;
  }
  // Bytes straight onto the socket (forged records); false when it failed (the peer left).
  bool send_raw(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }
  // One KeyUpdate asking for the gateway's, sent now (no data with it); false once refused.
  bool request_key_update() {
    return SSL_key_update(ssl_, SSL_KEY_UPDATE_REQUESTED) == 1 && SSL_do_handshake(ssl_) == 1;
  }
  // A KeyUpdate (`requested`: asking for the gateway's) and then `data` under the new key, both
  // in one TCP segment (corked): they reach the gateway's socket together, one wake-up for both.
  bool key_update_then(std::string_view data, bool requested) {
    int on = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_CORK, &on, sizeof on);
    const bool sent = SSL_key_update(ssl_, requested ? SSL_KEY_UPDATE_REQUESTED
                                                     : SSL_KEY_UPDATE_NOT_REQUESTED) == 1 &&
                      SSL_do_handshake(ssl_) == 1 && write(data);
    int off = 0;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_CORK, &off, sizeof off);  // out now, as one segment
    return sent;
  }

  // True once the gateway has closed the connection (end of stream, an alert, a reset) within
  // `timeout`: reads the raw socket, so what the gateway said last is not needed.
  bool closed_within(std::chrono::milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    char buffer[4096];
    while (std::chrono::steady_clock::now() < until) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return true;
    }
    return false;
  }

 private:
  SSL_CTX* ctx_;
  SSL* ssl_ = nullptr;
  int fd_ = -1;
  int receive_buffer_ = 0;
  std::string why_;
  tls_record_forger forger_;
};

}  // namespace gatewayd::test
