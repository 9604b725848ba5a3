// One supplier connection: waits for readability, reads big chunks, decodes every whole GWP/1
// frame and routes it; the only thread touching the connection is the one its strand admits.
// (supplier_session.cpp reads and routes; supplier_pause.cpp, supplier_close.cpp,
// supplier_confirms.cpp and supplier_handshake.cpp hold its other parts.)
#pragma once

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "consumers/flow_control.hpp"
#include "net/tls_channel.hpp"
#include "net/tls_context.hpp"
#include "protocol/confirm_ledger.hpp"
#include "protocol/frame_stream.hpp"
#include "runtime/idle_thread_probe.hpp"
#include "suppliers/confirm_replies.hpp"
#include "suppliers/frame_router.hpp"
#include "suppliers/frame_routers.hpp"
#include "suppliers/idle_clock.hpp"
#include "suppliers/route_snapshot.hpp"
#include "suppliers/supplier_stats.hpp"
#include "suppliers/tls_read_side.hpp"

namespace gatewayd::suppliers {

class session_registry;

// What every session shares, owned by the gateway and outliving all sessions.
struct session_context {
  const route_snapshot_holder& routes;
  supplier_stats& stats;
  session_registry& registry;
  std::uint32_t max_payload;
  std::chrono::milliseconds idle_timeout;  // 0 = never
  // max_partial_frame_bytes: what frames larger than a chunk may hold while they arrive.
  runtime::byte_budget* partial_budget = nullptr;
  // [tls]: every connection does a server handshake with the holder's context before its first
  // read; null = plaintext. Loaded at accept time: a reload's new context leaves open sessions be.
  const net::tls_context_holder* tls = nullptr;
  // How long a TLS handshake may take, and how long a supplier may leave unread what OpenSSL
  // must send it (a KeyUpdate answer) before it is closed as slow.
  std::chrono::milliseconds handshake_timeout{};  // handshake_timeout_ms
  // [tls] ktls = "auto": offer OpenSSL the kernel's record layer. A reload may change it; new
  // connections take the value of their accept.
  std::atomic<bool> kernel_tls{};  // set by the gateway with [tls]
  // CONFIRM frames: how many one connection may have unconfirmed
  // before it is read no more until confirms make room (max_unconfirmed_frames), and how long
  // its confirms may wait unread in the gateway's small buffer before it is closed as slow
  // (confirm_timeout_ms). The gateway sets these from gatewayd.toml; their defaults are the
  // configuration table's (config/settings.cpp).
  std::size_t max_unconfirmed = 0;
  std::chrono::milliseconds confirm_timeout{};
  // The routers read passes route through, one per thread (owned beside this context). Must be
  // set before the first session reads.
  frame_routers* routers = nullptr;
  // Whether a busy read pass may leave its writes to another thread: the gateway's pool says
  // whether one is idle; the default (no pool: unit tests, tools) says none is.
  runtime::idle_thread_probe idle_threads{};
};

class supplier_session : public std::enable_shared_from_this<supplier_session>,
                         public consumers::flow_control_listener,
                         private protocol::confirm_owner,
                         private confirm_replies_owner,
                         private idle_clock_owner,
                         private tls_read_side_owner {
 public:
  // Bytes read per pass: the consumers are handed what it routed once per pass.
  static constexpr std::size_t read_budget = 1024 * 1024;
  // Passes per event before yielding to other connections (fairness under load). A pass whose
  // writes another thread took is followed by the next at once, overlapping reads and writes.
  static constexpr std::size_t max_passes = 8;
  // How often a paused session asks the kernel whether its peer has left.
  static constexpr std::chrono::milliseconds pause_check{250};

  // `socket` runs on a strand of its own (the acceptor made it): its reads, timer and posts are
  // never handled by two threads at once. `peer`: the supplier's address when it is not the
  // socket's own (a PROXY protocol header named it).
  supplier_session(asio::ip::tcp::socket socket, session_context& ctx,
                   std::optional<asio::ip::tcp::endpoint> peer = std::nullopt);
  ~supplier_session();

  void start();
  // Closes the connection from any thread (posted to the session's strand).
  void stop();
  // Stops reading but keeps the connection (held: no new frames come in).
  void pause_reading();
  // The gateway's drain begins: nothing more is read. A connection that owes its supplier
  // nothing (plain, or every CONFIRM frame confirmed and the confirm written) is closed at once;
  // one still owed confirms is held open to receive those that settle during the drain, and
  // closed once it owes nothing more, or by stop() at the drain's end: what is unsettled then
  // stays so, and its supplier resends it elsewhere.
  void stop_reading();
  void resume_reading() override;
  // The backpressure consumer that paused it fell behind: from now on the connection cap may
  // reclaim it (paused_by_consumer_since() counts from here).
  void paused_by_stalled_consumer() override;
  // Lame-duck stop: half-closes the connection (the supplier reads end-of-file: asked to leave)
  // and goes on reading what it still sends until it closes its side.
  void ask_to_leave();

  const std::string& peer() const noexcept { return peer_; }
  const asio::ip::address& peer_address() const noexcept { return peer_address_; }
  // Closes the connection for `why` (the allow list changed), counted and logged.
  void expel(close_reason why);
  // On its strand: closes the connection (counted and logged as `revoked`) when the certificate
  // its supplier presented is revoked by the CRLs of `tls` (a reloaded [tls] context).
  void expel_if_revoked(std::shared_ptr<asio::ssl::context> tls);
  // Closes the connection to give its place to a new one (max_supplier_connections: the
  // registry chose it as the session paused longest), counted and logged as reclaimed. Its whole
  // frames are in the consumers' queues already; a frame it had only begun to receive is
  // discarded and counted.
  void reclaim();
  const session_stats& stats() const noexcept { return stats_; }
  // Not reading: paused by a consumer, held by the gateway's stop, or its unconfirmed CONFIRM
  // frames at max_unconfirmed_frames (read again once confirms make room). Any thread.
  bool paused() const noexcept {
    return in(state::paused) || in(state::held) || in(state::confirming);
  }
  // CONFIRM frames numbered and not yet confirmed: the supplier waits for their confirms (and,
  // with its own window full, sends nothing meanwhile). Any thread.
  bool awaiting_confirms() const noexcept {
    return stats_.pending.load(std::memory_order_relaxed) > 0;
  }
  // Since when it waits, without a break, paused or for confirms (either), on the steady clock;
  // nothing when it does neither. A session that waits is not idle: idle_timeout_ms never closes
  // it (a close would only make its supplier resend what the gateway holds already), and its idle
  // time counts from the end of the wait. Any thread.
  std::optional<std::chrono::steady_clock::time_point> waiting_since() const noexcept {
    return idle_.waiting_since();
  }
  // Since when it waits for a stalled backpressure consumer (paused by one that had fallen
  // behind, or told that the one that paused it has since), on the steady clock; nothing when it
  // is reading, departing, closed, held by the gateway's own stop, or paused only for a moment
  // (a consumer that keeps up, or one of another policy: consumer::put_result). Any thread.
  std::optional<std::chrono::steady_clock::time_point> paused_by_consumer_since() const noexcept {
    const auto at = paused_by_consumer_at_.load(std::memory_order_relaxed);
    if (at == not_paused) return std::nullopt;
    return std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(at));
  }
  // The verified client certificate's identity (subject CN, else first SAN DNS name); empty
  // for plaintext and for TLS without client_ca. Set before the first frame is read.
  const std::string& identity() const noexcept { return identity_; }

 private:
  // Where the connection is. Every change goes through enter(), the one place that says what
  // leaving and entering a state does; may_enter() holds this table, and enter() asserts it:
  //   (start)     -> handshaking (TLS) | reading (plaintext)
  //   handshaking -> reading (handshake done) | held | closed
  //   reading     -> paused (a consumer is full) | confirming (its unconfirmed CONFIRM frames
  //                  reached max_unconfirmed) | held | closed
  //   paused      -> reading (resume_reading) | confirming (resumed with its unconfirmed frames
  //                  at the bound) | departing (its peer left) | held | closed
  //   departing   -> held (then closed at once: its peer has left) | closed
  //   confirming  -> reading (confirms made room) | held | closed (also when its peer left)
  //   held        -> closed
  // Written on the strand only; atomic so /connz may read paused() from its own thread.
  // (session_state, in supplier_stats.hpp, says what each state means; every open session is
  // counted in the one it is in.)
  using state = session_state;
  bool in(state s) const noexcept { return state_.load(std::memory_order_relaxed) == s; }
  static bool may_enter(state from, state to) noexcept;
  void enter(state next) noexcept;
  void count_in(state s, std::int64_t n) noexcept {
    if (s != state::closed)
      ctx_.stats.sessions[static_cast<std::size_t>(s)].fetch_add(n, std::memory_order_relaxed);
  }

  // Why a read pass ended: what the session does next follows from it alone.
  enum class pass_end : std::uint8_t {
    drained,           // the socket holds nothing more for now: wait for it
    budget,            // read_budget read, more may wait: another pass, or wait
    consumer_paused,   // a consumer asked it to stop reading (not while departing)
    stalled_consumer,  // the same, by a stalled backpressure consumer: reclaimable at the cap
    confirms_full,     // its unconfirmed CONFIRM frames reached the bound
    peer_gone,         // the peer closed, or the read failed (read_error)
    refused,           // the frame arriving cannot grow within max_partial_frame_bytes
    bad_frame,         // a protocol error (error); the whole frames before it were routed
    unnumbered,        // a CONFIRM frame found no room in the ledger (a bug)
  };
  // What routing the bytes of one or more reads came to.
  struct routed {
    std::uint64_t frames = 0;
    pass_end end = pass_end::drained;
    bool handed_off = false;                     // another thread writes what the last pass routed
    protocol::frame_stream::stream_error error;  // end == bad_frame
    std::error_code read_error;                  // end == peer_gone: what ended the read
  };

  // TLS (supplier_handshake.cpp): the handshake before the first read.
  void do_handshake();
  void on_handshake(std::error_code ec);
  void fail_handshake(net::tls_failure why, const std::error_code& ec);
  // The handshake must be done within handshake_timeout, or it fails as timed out.
  void arm_handshake_deadline();
  // TLS: unauthenticated, it holds no place under max_supplier_connections, only a slot under
  // max_handshaking_connections, where the newest connection takes the oldest's (start()).
  void begin_handshake();
  // At max_handshaking_connections a newer connection took its slot: closed, unless its
  // handshake ended meanwhile. Posted to the strand by the registry.
  void evict_handshake();
  // Its handshake is over (done, failed, or the connection closed): it leaves the registry's
  // list of handshakes.
  void end_handshake() noexcept;
  void begin_reading();
  // The one read seam: plaintext reads the socket into the chunk, TLS decrypts into it. A
  // branch per read (a chunk of many frames), chosen once at connection setup; no copy either way.
  std::size_t read_some(asio::mutable_buffer into, std::error_code& ec) {
    if (!tls_) return socket_.read_some(into, ec);
    return tls_read_.read_some(*tls_, into, ec);
  }
  // TLS: the connection ended other than by close_notify after its handshake: counted by
  // reason and logged, then closed.
  void fail_tls(const std::error_code& ec);
  // tls_read_side_owner: OpenSSL had to send before it could read on (a KeyUpdate answer) and
  // the supplier took nothing for handshake_timeout: closed as slow, if that wait is still out.
  void send_stalled() override;
  void do_wait();
  void on_readable(std::error_code ec);
  void read_and_route();
  void read_pass(routed& all);
  // Parses every whole frame the stream holds and routes it into `router` (on the session's
  // strand), holding the chunk references the frames need. Counts frames and unroutable ones.
  // Adds them to r.frames; r.end is bad_frame or unnumbered when one of those ended the parse.
  void route_frames(frame_router& router, routed& r);
  // Hands the consumers what was routed; `busy`: more was waiting than one read took. A
  // consumer's pause ends the pass (r.end) unless a close does, or the session departs;
  // r.handed_off as the router says.
  void flush(frame_router& router, bool busy, routed& r);
  // On the strand, after the bytes of an event were routed: fail, pause, or wait again.
  void after_routing(const routed& r);
  // After a change of state or of the frames owed a confirm: starts or ends the wait
  // (waiting_since); its end restarts the idle clock.
  void update_waiting() noexcept {
    idle_.set_waiting(!in(state::closed) && (paused() || awaiting_confirms()));
  }
  // Kept alive by what its parts (the idle clock, the confirm replies, the TLS read side) have
  // out.
  std::shared_ptr<void> keep_alive() override { return shared_from_this(); }

  // Not reading (supplier_pause.cpp). Stops reading (`why`: paused, held or confirming),
  // watching for the peer to leave meanwhile.
  void pause(state why);
  // Reads no more until its own unconfirmed frames (max_unconfirmed_frames) leave room.
  void wait_for_confirms();
  bool peer_left();
  // The peer left while paused: read what it sent to the end, then close.
  void depart();
  void set_paused_by_consumer(bool on) noexcept;
  // While paused or held: asks the kernel every pause_check whether the peer has left.
  void arm_pause_check();
  void on_pause_check(std::error_code ec);

  // Its end (supplier_close.cpp). `ec`: what ended the read if it was not an orderly end (TLS:
  // counted as a TLS error).
  void closed_by_peer(const std::error_code& ec = {});
  void fail_protocol(const protocol::frame_stream::stream_error& e);
  // The frame being received cannot grow within max_partial_frame_bytes: close and count.
  void refuse_growth();
  // idle_clock_owner: idle_timeout passed without a whole frame: closed, counted and logged.
  void idle_expired(std::chrono::steady_clock::duration idle) override;
  // `partial`: why a frame received in part is thrown away with the connection, to count it by;
  // not_a_frame when what the stream holds is no frame (after a protocol error, or before any).
  static constexpr std::optional<partial_discard> not_a_frame = std::nullopt;
  void close(std::optional<partial_discard> partial);
  void count_partial(partial_discard why) noexcept;

  // CONFIRM frames (supplier_confirms.cpp). Numbers one and routes it (refused or routed to
  // no consumer, it is rejected at once); makes the replies on the first.
  frame_router::outcome route_confirmed(frame_router& router, const protocol::frame_view& f,
                                        const protocol::frame_slice& s, routed& r);
  // Any thread: a consumer settled the last owing frame; the flush is posted to the strand.
  void confirms_settled() noexcept override;
  // Strand: what settled goes back to the supplier (the replies write it); then as below.
  void flush_confirms();
  // confirm_replies_owner. The replies wrote: the wait for confirms may end, reading may resume
  // if it waited for room, and a session held by the gateway's stop closes once it owes nothing.
  void confirms_written() override;
  void confirms_unread(std::size_t unwritten) override;

  asio::ip::tcp::socket socket_;
  std::shared_ptr<asio::ssl::context> tls_context_;  // the one this connection started with
  std::shared_ptr<net::tls_channel> tls_;            // null = plaintext
  std::string identity_;
  // One timer per purpose. None is armed per read: the idle clock's is re-armed for the
  // remainder when it expires, the others once per handshake, pause or wait for room to send.
  idle_clock idle_;                 // idle_timeout without a whole frame, outside a wait: closes
  asio::steady_timer pause_timer_;  // while paused or held: has the peer left?
  asio::steady_timer handshake_deadline_;  // TLS: the handshake takes at most handshake_timeout
  tls_read_side tls_read_;                 // TLS: what the next wait is for, and its deadline
  session_context& ctx_;
  protocol::frame_stream stream_;
  std::string peer_;
  asio::ip::address peer_address_;
  session_stats stats_;
  std::atomic<state> state_;
  bool waiting_ = false;  // an async_wait (or a read posted in its place) is pending
  // While paused by a stalled backpressure consumer (state::paused only): since when,
  // steady-clock ticks, for the connection cap to reclaim the one paused longest (the registry
  // reads it at the cap, /connz shows it). Written on the strand only.
  static constexpr std::chrono::steady_clock::rep not_paused =
      std::numeric_limits<std::chrono::steady_clock::rep>::min();
  std::atomic<std::chrono::steady_clock::rep> paused_by_consumer_at_{not_paused};
  std::uint64_t handshake_ticket_ = 0;  // TLS: in the registry's handshakes while not 0
  // CONFIRM frames: null until the first one (a plain supplier pays a null pointer).
  std::unique_ptr<confirm_replies> replies_;
};

}  // namespace gatewayd::suppliers
