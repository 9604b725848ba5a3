#include "net/tls_traffic_secrets.hpp"

#include <string_view>

namespace gatewayd::net {

namespace {

int watcher_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

void on_key_log(const SSL* ssl, const char* line) {
  auto* secrets = static_cast<tls_traffic_secrets*>(SSL_get_ex_data(ssl, watcher_index()));
  if (!secrets) return;
  // "LABEL <64 hex digits of the client random> <hex secret>" (NSS key log format).
  const std::string_view text(line);
  const auto take = [&](std::string_view label, traffic_secret& into) {
    const std::size_t secret_at = label.size() + 1 + 64 + 1;
    if (text.size() > secret_at && text.starts_with(label) && text[label.size()] == ' ') {
      into.assign_hex(text.substr(secret_at));
    }
  };
  take("CLIENT_TRAFFIC_SECRET_0", secrets->client);
  take("SERVER_TRAFFIC_SECRET_0", secrets->server);
}

}  // namespace

void tls_traffic_secrets::install(SSL_CTX* ctx) noexcept {
  SSL_CTX_set_keylog_callback(ctx, &on_key_log);
}

void tls_traffic_secrets::watch(SSL* ssl) noexcept {
  SSL_set_ex_data(ssl, watcher_index(), this);
}

void tls_traffic_secrets::stop_watching(SSL* ssl) noexcept {
  SSL_set_ex_data(ssl, watcher_index(), nullptr);
}

std::unique_ptr<tls13_records> take_over_records(SSL* ssl, const tls_traffic_secrets& secrets,
                                                 bool server) {
  if (SSL_has_pending(ssl) || (server && SSL_get_num_tickets(ssl) != 0)) return nullptr;
  return tls13_records::make(ssl, server ? secrets.client : secrets.server,
                             server ? secrets.server : secrets.client);
}

}  // namespace gatewayd::net
