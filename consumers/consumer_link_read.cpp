// The link's read side: the one read out on a connection, which notices the peer leave,
// passes on an `ack = true` consumer's acks, and hears a TLS consumer refuse our certificate.
#include "consumers/consumer_link.hpp"
#include "consumers/tls_dial_failure.hpp"
#include "runtime/log.hpp"
#include "runtime/log_limit.hpp"

namespace gatewayd::consumers {

// Consumers without `ack` send nothing; one small read stays pending only to notice the peer
// closing while the queue is idle (a write would notice too, but only once there is something
// to send), and what it reads counts against max_unsolicited_bytes (an add and a compare per
// read, on the read side only: the write path is untouched). Those with it send their acks on the
// same read. On a TLS link the read goes through
// the stream (it also takes the records a TLS 1.3 server sends after the handshake, and the
// acks come out of the channel as on a plaintext one); it runs beside the drain's writes, both
// on the strand.
void consumer_link::read_until_closed(std::uint64_t conn) {
  auto on_read = [self = events_.keep_alive(), this, stream = stream_, conn](std::error_code ec,
                                                                             std::size_t n) {
    if (unexplained_ && unexplained_->conn == conn) return explain(ec);
    if (vetting(conn)) {
      if (!ec) {
        // Nothing was written yet: only its framing is kept, what it says is not judged.
        if (acks_) acks_->received(n, [](std::uint64_t) { return true; });
        return read_until_closed(conn);  // a consumer that talks: nothing to refuse
      }
      redial_timer_.cancel();
      // A close or a certificate alert is its verdict on our certificate; any other alert
      // (one that ends a renegotiation it asked for, say) is not.
      if (tls_alert_from_peer(ec) && !tls_certificate_alert(ec)) {
        return handshake_failed(
            connect_failure::tls_protocol,
            "it ended the connection right after the TLS handshake (" + ec.message() + ")");
      }
      return handshake_failed(connect_failure::tls_rejected,
                              "it closed the connection right after the TLS handshake (" +
                                  ec.message() + "; does it want a client certificate?)");
    }
    if (!up(conn)) return;
    // Once up, only an alert about our certificate is a refusal of the dial (a TLS 1.3 consumer
    // slower to judge it than the vetting time); any other alert ends a connection that was up: a
    // disconnect, counted with the TLS errors.
    if (ec && stream && tls_certificate_alert(ec)) return refused_after_handshake(conn, ec);
    if (ec) return lost(conn, ec);
    if (acks_) return read_acks(conn, n);
    unsolicited_ += n;
    if (unsolicited_ > max_unsolicited_bytes) {
      return protocol_error(conn, ack_error::unsolicited_bytes);
    }
    read_until_closed(conn);
  };
  const auto into = acks_ ? asio::buffer(acks_->free_space().data(), acks_->free_space().size())
                          : asio::buffer(discard_);
  if (stream_) return stream_->async_read_some(into, std::move(on_read));
  socket_.async_read_some(into, std::move(on_read));
}

// One apply per read: the reader checks every ack and passes on the highest of them; a run of
// acks that moved nothing, past its bound, ends the connection (a compare per read).
void consumer_link::read_acks(std::uint64_t conn, std::size_t n) {
  ack_error refused = ack_error::none;
  const ack_error malformed = acks_->received(n, [&](std::uint64_t number) {
    refused = events_.on_ack(conn, number);
    return refused == ack_error::none;
  });
  if (!up(conn)) return;
  if (refused != ack_error::none) return protocol_error(conn, refused);
  if (malformed != ack_error::none) return protocol_error(conn, malformed);
  if (acks_->stalled_bytes() > ack_reader::max_stalled_ack_bytes) {
    return protocol_error(conn, ack_error::ack_not_advancing);
  }
  read_until_closed(conn);
}

// Closed and redialled as after any failure (drop, then wait_to_redial: the backoff grows while
// connections end this soon): what it had not acknowledged goes first to the next connection.
void consumer_link::protocol_error(std::uint64_t conn, ack_error why) {
  if (!up(conn)) return;
  stats_.protocol_errors[static_cast<std::size_t>(why)].fetch_add(1, std::memory_order_relaxed);
  const std::string what =
      acks_ ? "sent something other than well-formed acks" : "sent bytes back without ack = true";
  stats_.last_error.set(what + " (" + std::string{to_string(why)} + "); disconnected");
  GW_LOG_LIMITED_BY(warning, failure_log_)
      << "consumer " << name_ << " at " << endpoint_.to_string() << " " << what << " ("
      << to_string(why) << "); disconnecting, its unacknowledged frames go first to the next "
      << "connection";
  drop(disconnect_reason::protocol_error);
  wait_to_redial();
}

// TLS 1.3: the consumer judged our certificate (or its absence) after our side of the handshake
// was done, and said no with an alert. A failed dial, not a lost connection (the alert ended a
// TLS connection: it counts as a TLS error too).
void consumer_link::refused_after_handshake(std::uint64_t conn, std::error_code ec) {
  if (!up(conn)) return;
  count_tls_error(ec);
  take_down();
  handshake_failed(connect_failure::tls_rejected, "it refused the TLS handshake (" + ec.message() +
                                                      "; does it want a client certificate?)");
}

}  // namespace gatewayd::consumers
