// A TLS consumer for the consumer-leg tests: a server on 127.0.0.1 with a certificate the test CA
// signed, optionally requiring a client certificate, that parses what arrives as GWP/1 frames.
#pragma once

#include <array>
#include <asio.hpp>
#include <asio/ssl.hpp>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "protocol/frame_codec.hpp"
#include "tests/support/test_peers.hpp"
#include "tests/support/tls_peers.hpp"

namespace gatewayd::test {

class tls_test_consumer {
 public:
  // `cert`: the pki's certificate it presents; `client_ca`: require a client certificate
  // that the test CA signed; `setup` may restrict the context further (versions, suites).
  tls_test_consumer(const pki& p, const std::string& cert, bool client_ca,
                    const std::function<void(SSL_CTX*)>& setup = {})
      : ctx_(asio::ssl::context::tls_server),
        acceptor_(ioc_, {asio::ip::make_address("127.0.0.1"), 0}) {
    ctx_.use_certificate_chain_file(p.at(cert + ".crt").string());
    ctx_.use_private_key_file(p.at(cert + ".key").string(), asio::ssl::context::pem);
    if (client_ca) {
      ctx_.load_verify_file(p.at("ca.crt").string());
      ctx_.set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
    }
    if (setup) setup(ctx_.native_handle());
    accept();
    thread_ = std::thread([this] { ioc_.run(); });
  }
  ~tls_test_consumer() {
    ioc_.stop();
    thread_.join();
  }
  tls_test_consumer(const tls_test_consumer&) = delete;
  tls_test_consumer& operator=(const tls_test_consumer&) = delete;

  std::string endpoint() const {
    return "127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
  }
  std::vector<std::string> payloads() const {
    std::lock_guard lock(mutex_);
    return payloads_;
  }
  std::size_t count() const {
    std::lock_guard lock(mutex_);
    return payloads_.size();
  }
  std::size_t handshakes() const noexcept { return handshakes_.load(); }
  std::size_t failed_handshakes() const noexcept { return failed_.load(); }
  std::size_t corruptions() const noexcept { return corruptions_.load(); }
  // Connections the gateway ended with close_notify, and ones that ended without it.
  std::size_t clean_closes() const noexcept { return clean_closes_.load(); }
  std::size_t cut_closes() const noexcept { return cut_closes_.load(); }
  bool wait_for_count(std::size_t n, std::chrono::milliseconds timeout) const {
    return eventually([&] { return count() >= n; }, timeout);
  }
  // The suite the last handshake agreed on (OpenSSL's name).
  std::string cipher() const {
    std::lock_guard lock(mutex_);
    return cipher_;
  }
  // Closes every connection's socket without close_notify (a consumer host that went away).
  void cut_all() {
    asio::post(ioc_, [this] {
      for (const auto& s : streams_) {
        std::error_code ignored;
        s->lowest_layer().close(ignored);
      }
    });
  }

 private:
  using stream = asio::ssl::stream<asio::ip::tcp::socket>;
  struct connection {
    std::shared_ptr<stream> s;
    std::string pending;
    std::array<char, 65536> buf{};
  };

  void accept() {
    acceptor_.async_accept([this](std::error_code ec, asio::ip::tcp::socket socket) {
      if (ec) return;
      // Made once, never move-assigned (Asio 1.28 leaks the SSL object a move replaces).
      auto c = std::make_shared<connection>();
      c->s = std::make_shared<stream>(std::move(socket), ctx_);
      streams_.push_back(c->s);
      c->s->async_handshake(asio::ssl::stream_base::server, [this, c](std::error_code e) {
        if (e) {
          ++failed_;
          return;
        }
        {
          std::lock_guard lock(mutex_);
          cipher_ = SSL_get_cipher_name(c->s->native_handle());
        }
        ++handshakes_;
        read(c);
      });
      accept();
    });
  }

  void read(const std::shared_ptr<connection>& c) {
    c->s->async_read_some(asio::buffer(c->buf), [this, c](std::error_code ec, std::size_t n) {
      if (ec) {
        // What OpenSSL saw, not Asio's error: Asio reports a plain end of stream as eof too.
        if (ec == asio::error::operation_aborted) return;
        const bool told = SSL_get_shutdown(c->s->native_handle()) & SSL_RECEIVED_SHUTDOWN;
        ++(told ? clean_closes_ : cut_closes_);
        return;
      }
      c->pending.append(c->buf.data(), n);
      std::size_t at = 0;
      for (;;) {
        const auto r = protocol::parse_frame(std::string_view(c->pending).substr(at), 1u << 20);
        if (r.state == protocol::parse_result::status::error) {
          ++corruptions_;
          return;
        }
        if (r.state != protocol::parse_result::status::frame) break;
        {
          std::lock_guard lock(mutex_);
          payloads_.emplace_back(r.frame.payload);
        }
        at += r.frame.bytes.size();
      }
      c->pending.erase(0, at);
      read(c);
    });
  }

  asio::io_context ioc_;
  asio::ssl::context ctx_;
  asio::ip::tcp::acceptor acceptor_;
  std::vector<std::shared_ptr<stream>> streams_;  // io thread only
  std::thread thread_;
  std::atomic<std::size_t> handshakes_{0};
  std::atomic<std::size_t> failed_{0};
  std::atomic<std::size_t> corruptions_{0};
  std::atomic<std::size_t> clean_closes_{0};
  std::atomic<std::size_t> cut_closes_{0};
  mutable std::mutex mutex_;
  std::vector<std::string> payloads_;
  std::string cipher_;
};

}  // namespace gatewayd::test
