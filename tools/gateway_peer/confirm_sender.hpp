// `gateway-peer send --confirm`: one connection's sending thread that asks the gateway to
// confirm every frame, keeps at most --window of them unconfirmed, reads the gateway's confirms
// and rejects on the same socket while it writes (poll(), no second thread), and on its next
// connection sends the frames still unconfirmed again first, byte for byte.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tools/gateway_peer/options.hpp"
#include "tools/gateway_peer/send_report.hpp"
#include "tools/gateway_peer/tls_stream.hpp"
#include "tools/traffic/confirm_window.hpp"
#include "tools/traffic/control_inbox.hpp"
#include "tools/traffic/frame_batch.hpp"
#include "tools/traffic/supplier_link.hpp"

namespace gatewayd::tools {

class confirm_sender {
 public:
  // `count`: frames to send (0 = no limit); `rate`: frames/s (0 = as fast as the window lets
  // it); `deadline_ns`: CLOCK_MONOTONIC end of the sending (0 = none).
  // `tls`: the TLS layer over the link's connection (its handshake done), or null for plaintext.
  confirm_sender(const send_options& o, std::uint64_t count, double rate, std::uint64_t deadline_ns,
                 tls_stream* tls = nullptr);

  // Sends until the count, the deadline or a stop request, waits (bounded) for the last
  // confirms, and reports.
  connection_result run(traffic::supplier_link& link);

 private:
  // Sending new frames; then only resending and waiting for the confirms of what was sent.
  enum class phase { sending, draining };
  // Why the current connection is over (none while it is usable).
  enum class ending { none, end_of_file, lost, bad_control, cut };

  void open_record(const traffic::supplier_link& link);
  // Switches to draining once the count, the deadline or a stop request says so.
  void check_end(std::uint64_t now);
  bool out_of_time(std::uint64_t now) const;
  // True once frames have waited unsettled longer than --confirm-deadline with no confirm or
  // reject coming on this connection (the clock restarts at each one, and while none is owed).
  bool confirms_overdue(std::uint64_t now);
  // Dials again after a lost connection (with --reconnect): false when the phase's stop or
  // deadline came first.
  bool redial(traffic::supplier_link& link);
  // Closes the connection that ended, records why; without --reconnect that is the end.
  void end_connection(traffic::supplier_link& link);

  // Reads and applies every control message waiting: false once the connection is over.
  bool read_control(traffic::supplier_link& link);
  // Waits until the socket is readable (and reads) or `until_ns` (at most 100 ms from now).
  void wait_readable(traffic::supplier_link& link, std::uint64_t now, std::uint64_t until_ns);
  // Writes all of `bytes`, reading control messages while the socket is full. False once the
  // connection is over (see ending_).
  bool write(traffic::supplier_link& link, std::string_view bytes);
  // The same through TLS: records handed to OpenSSL and flushed without blocking, confirms
  // read while the socket is full.
  bool write_tls(traffic::supplier_link& link, std::string_view bytes);
  // What the gateway sent back, as recv(): through TLS when there is a TLS layer.
  ssize_t receive(traffic::supplier_link& link, void* buffer, std::size_t size);
  // Whether a wait on the socket should end: the run's end, its stop, the confirm deadline.
  bool keep_waiting();
  void send_new(traffic::supplier_link& link, std::size_t n, std::uint64_t now);
  void resend_some(traffic::supplier_link& link);
  void fail(ending e, std::string why) {
    ending_ = e;
    why_ = std::move(why);
  }

  const send_options& o_;
  tls_stream* tls_;
  std::uint64_t count_;
  double rate_;
  std::uint64_t deadline_ns_;
  traffic::frame_batch batch_;
  traffic::confirm_window window_;
  traffic::control_inbox inbox_;
  std::string resend_bytes_;
  connection_result r_;
  phase phase_ = phase::sending;
  std::uint64_t drain_deadline_ns_ = 0;
  ending ending_ = ending::none;
  std::string why_;
  bool gave_up_ = false;            // a connection ended without --reconnect
  std::uint64_t settled_seen_ = 0;  // confirmed + rejected when last looked at
  std::uint64_t progress_ns_ = 0;   // when that last grew, or nothing was owed
};

}  // namespace gatewayd::tools
