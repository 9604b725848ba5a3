// One downstream consumer as an active object: a queue filled from any thread under the overflow
// policy and drained by its own writer into the socket its link keeps dialled; it owns the
// parts (link, drain, acks, group membership, closing) and the one lock its queue and states
// share.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "consumers/admission.hpp"
#include "consumers/confirm_share.hpp"
#include "consumers/consumer_acks.hpp"
#include "consumers/consumer_closing.hpp"
#include "consumers/consumer_link.hpp"
#include "consumers/consumer_spec.hpp"
#include "consumers/consumer_spool.hpp"
#include "consumers/consumer_stats.hpp"
#include "consumers/flow_control.hpp"
#include "consumers/frame_packer.hpp"
#include "consumers/frame_queue.hpp"
#include "consumers/group_membership.hpp"
#include "consumers/paused_suppliers.hpp"
#include "consumers/strand_drain.hpp"
#include "consumers/write_batch.hpp"
#include "runtime/executor.hpp"

namespace gatewayd::consumers {

class consumer_group;

class consumer : public std::enable_shared_from_this<consumer>,
                 private link_events,
                 private batch_source,
                 private membership_owner,
                 private closing_owner,
                 private spool_events {
 public:
  // The gateway fills every duration from gatewayd.toml; their defaults are the configuration
  // table's (config/settings.cpp), so none is written here.
  struct options {
    std::chrono::milliseconds reconnect_initial{};  // reconnect_initial_ms
    std::chrono::milliseconds reconnect_max{};      // reconnect_max_ms
    // The gateway-wide byte cap shared by all consumers (max_queued_bytes); may be null.
    runtime::byte_budget* budget = nullptr;
    // Its share of max_confirm_ledger_bytes, in CONFIRM frames owed; may be null (no bound).
    const confirm_share* confirms = nullptr;
    // How long a consumer whose socket is full may take to catch up (empty its queue) before
    // it counts as slow and its overflow policy applies; until then the gateway holds its
    // frames and pauses the suppliers feeding it at the high-water mark. Longer than a busy
    // machine keeps a reader off the CPU, short enough that the suppliers' TCP buffers hold
    // what they send meanwhile. slow_consumer_ms.
    std::chrono::milliseconds slow_after{};
    link_limits limits;  // dial deadline and dead-peer bound of its connections
  };

  struct put_result {
    std::uint32_t queued = 0;     // frames accepted into the queue
    bool pause_supplier = false;  // backpressure: the caller should stop reading until resumed
    // The pause lasts as long as the consumer stalls: a backpressure consumer that has fallen
    // behind (congested) resumes its suppliers only once it has drained to half its limits. Not
    // a pause by one that keeps up (the gateway's high-water mark: moments), nor by one of
    // another policy, which lets them go within slow_after at the latest. Suppliers it paused
    // before it fell behind and still holds are told then (paused_by_stalled_consumer). The
    // supplier connection cap reclaims only sessions paused so.
    bool paused_by_consumer = false;
    bool wrote = false;  // the caller's thread wrote the frames (or writes them now)
  };

  consumer(const runtime::executor& ex, consumer_spec spec, options opts);
  ~consumer();
  consumer(const consumer&) = delete;
  consumer& operator=(const consumer&) = delete;

  // Gives it a spool on disk in `dir` (spool_max_bytes `max_bytes`), kept by `spools`: what
  // its memory queue cannot hold goes there (consumer_spool.hpp). Call before start(), once.
  // False, with `ec`, when the folder cannot be used (the consumer then runs without one).
  bool open_spool(spool_thread& spools, const std::filesystem::path& dir, std::uint64_t max_bytes,
                  std::error_code& ec);
  // Its spool, if it has one (for /metrics and /connz).
  const spool* spool_files() const noexcept { return spool_.files().get(); }

  // Starts dialing the endpoint. Call once, after construction (needs shared_from_this).
  void start();

  // Any thread; never blocks on the network. Takes over exactly one chunk reference per slice (the
  // caller added them), whether the frame is queued or dropped, and applies the overflow policy.
  // With the backpressure policy, when the queue is at its limit, `listener` (if not null) is
  // remembered and resumed once the queue falls below the low-water mark. `drain_here`: when no
  // writer runs, the caller's thread writes the frames itself (one hop: the frame reaches the
  // socket without waking another thread); false posts the write to the consumer's strand, for a
  // free thread to take while the caller goes on reading.
  put_result put(std::span<const frame_slice> frames,
                 const std::shared_ptr<flow_control_listener>& listener, bool drain_here = true);

  // Reload: capacity, byte cap and policy change in place; a new endpoint, or TLS settings that
  // changed (files, their contents, server name), redials, keeping the queue. The name never
  // changes.
  void reconfigure(const consumer_spec& spec);

  // Keeps sending what it holds, and what sessions still routing by an older table hand it,
  // for at most `timeout`, then closes (later puts count as drop reason `removed`) and calls
  // `done(undelivered frames)` once, on the consumer's strand. The frames left are counted as
  // dropped with `reason`. Paused suppliers are resumed and nobody is paused any more.
  void drain_and_close(std::chrono::milliseconds timeout, drop_reason reason,
                       std::function<void(std::uint64_t undelivered)> done);

  // Group membership (group_membership.hpp; consumer_handover.cpp). Any thread: from now on,
  // what it holds when it fails (link down, or behind by slow_after) goes to `group`'s other
  // live members (an empty `group`: to nobody, it keeps what it holds, as a consumer that is not
  // a member).
  void join(std::weak_ptr<consumer_group> group);
  // A reload removed it from its group: what it has queued goes to `group`'s members now, and
  // again when its drain begins (what passes by the older table gave it meanwhile); what it has
  // out (a write, frames not acknowledged) goes to its own endpoint while it drains.
  void leave_group(std::weak_ptr<consumer_group> group);
  // Any thread: frames another member handed over, oldest first, go in front of the queue.
  void take_over(std::span<const frame_slice> frames);
  // Any thread: if it is down (or behind) while another member is up, it hands over.
  void hand_over_if_down() { membership_.hand_over_if_down(); }

  const std::string& name() const noexcept { return name_; }
  // Its endpoint as written, when it is a group member (the `member` label); else empty.
  const std::string& member() const noexcept { return member_; }
  // It acknowledges what it takes (`ack = true`): fixed for its life (a reload replaces it).
  bool acks() const noexcept { return acks_.acks(); }
  const consumer_stats& stats() const noexcept { return stats_; }
  std::uint32_t capacity() const noexcept;
  overflow_policy policy() const noexcept;
  // CONFIRM frames it may owe before it is full (0: no bound; confirm_share.hpp).
  std::uint64_t confirm_share() const noexcept {
    return opts_.confirms ? opts_.confirms->frames() : 0;
  }

 private:
  // Where its end is: the closing part's table (consumer_closing.hpp).
  using life = consumer_closing::life;

  // How frames flow to the consumer's endpoint, under mutex_. Every change goes through
  // enter_locked(), which holds the table of transitions:
  //   disconnected -> keeping_up (link up, nothing waited) | congested (link up, frames waited)
  //   keeping_up   -> refusing (socket full) | moving (reload) | disconnected (link down)
  //   refusing     -> keeping_up (queue emptied) | congested (slow_after passed) | moving |
  //                   disconnected
  //   congested    -> keeping_up (queue emptied) | disconnected (link down, policy gave it up,
  //                   reload)
  //   moving       -> disconnected (the old connection goes down)
  enum class flow : std::uint8_t {
    // No connection to write to: its overflow policy applies (admission.hpp). The start.
    disconnected,
    // A reload moved it: frames wait for the new endpoint, held as by one that keeps up,
    // until the old connection goes down (at once, on the strand).
    moving,
    // Connected, the socket takes what it is given: the gateway holds its frames and pauses
    // the suppliers at the high-water mark.
    keeping_up,
    // Connected, the socket refused bytes and the queue has not emptied since: within its
    // grace (options::slow_after) the queue may fill to its own limits; only a full queue
    // pauses the suppliers, and nothing is dropped yet.
    refusing,
    // Connected, but it fell behind (the grace passed): its overflow policy applies.
    congested,
  };
  static bool writable(flow f) noexcept {
    return f == flow::keeping_up || f == flow::refusing || f == flow::congested;
  }
  static bool policy_applies(flow f) noexcept {
    return f == flow::congested || f == flow::disconnected;
  }
  void enter_locked(flow to) noexcept;

  // The writer role: at most one strand writer takes batches for the socket. Under mutex_;
  // enter_writer_locked() holds the table of transitions:
  //   idle       -> writing (frames wait on a writable link: put, link up, handover)
  //   writing    -> idle (nothing left to write, or the link is not writable) |
  //                 parked (an `ack` consumer holds max_unacked_bytes: the role stays taken
  //                 until an ack or a reload makes room) |
  //                 discarding (the disconnect policy fired while a write was out)
  //   parked     -> writing (resume_parked_writer) | idle (the link went down)
  //   discarding -> writing (the write came back failed: its batch was discarded) |
  //                 idle (it came back whole, and nothing is left to write)
  enum class writer : std::uint8_t { idle, writing, parked, discarding };
  void enter_writer_locked(writer to) noexcept;
  // An ack or a reload made room under max_unacked_bytes: a parked writer goes on. Strand;
  // false when there was none to resume.
  bool resume_parked_writer();

  // link_events (strand).
  void on_link_up(std::uint64_t conn) override;
  void on_link_down() override;
  ack_error on_ack(std::uint64_t conn, std::uint64_t n) override;
  // For every part (link_events, batch_source, membership_owner, closing_owner): their handlers
  // hold the consumer.
  std::shared_ptr<void> keep_alive() override { return shared_from_this(); }

  // membership_owner (consumer_handover.cpp).
  const consumer& as_member() const noexcept override { return *this; }
  void take_held(handover_cause cause, std::vector<frame_slice>& out) override;

  // spool_events, and the rest of its spool (consumer_spooling.cpp).
  void spool_read_done(std::vector<frame_slice> frames, std::uint64_t generation) override;
  void spool_may_resume() override;
  // Its spool's disk is behind by more than `by` bytes (caught_up_bytes: paused suppliers wait;
  // behind_bytes: a put pauses its supplier); the spool is asked to say when it is not.
  bool spool_behind(std::uint64_t by = spool_events::caught_up_bytes) const noexcept;
  // Strand: a read came back; its frames join the queue, behind what it holds.
  void take_spool_read(std::vector<frame_slice>& frames, std::uint64_t generation);
  // Under mutex_: put() hands `frames` to its spool (it is spooling, or starts to). True when
  // suppliers it paused may go on (the caller has the strand resume them).
  bool spool_put_locked(std::span<const frame_slice> frames, put_result& result,
                        const std::shared_ptr<flow_control_listener>& listener);
  // Whether put() sends `frames` to the spool rather than to the queue.
  bool spools_locked() const noexcept;
  // Strand: what it holds in memory goes to its spool if it is away (link down: its
  // unacknowledged frames too) or behind (its queue).
  void spill_if_away();
  // Strand, its drain (drain_and_close): what it holds goes to its spool, whose sync then ends
  // the drain. False once the drain is over (or it has no spool): check_drain goes on.
  bool spool_at_end();
  // Under mutex_, strand: what it holds in memory (its queue, and with `unacked_too` its
  // unacknowledged frames, older) goes to its spool, in front. False when it held nothing.
  bool spill_locked(bool unacked_too);
  // Strand: a read from its spool, if it is connected and its queue is short.
  void read_spool_if_due();
  // Strand: frames delivered (written whole, or acknowledged) that came from its spool are
  // consumed from it; once it has nothing left, frames go to memory again.
  void spool_delivered(std::span<const frame_slice> frames);

  // closing_owner, and the rest of its end (consumer_close.cpp).
  void end_drain() override;
  void begin_drain(std::chrono::milliseconds timeout, drop_reason reason,
                   std::function<void(std::uint64_t)> done);
  void check_drain();
  void complete_close();

  // batch_source, for the drain (strand).
  bool take_batch(write_batch& batch, std::uint64_t& conn) override;
  void batch_sent(write_batch& batch, std::size_t n) override;
  // Unless the consumer catches up (its queue empties) within options::slow_after, it is slow,
  // and its overflow policy applies.
  void batch_refused() override;
  // The unsent rest goes back to the queue, or away if the disconnect policy fired meanwhile.
  void batch_failed(write_batch& rest) override;

  // Under mutex_: the next batch, or false after giving up the writer role. `left_refusing`:
  // the queue emptied while the socket was refusing. `parked`: an `ack` consumer holds
  // max_unacked_bytes: the writer role stays taken, and an ack that makes room resumes it.
  bool take_batch_locked(write_batch& batch, std::uint64_t& conn, bool& left_refusing,
                         bool& parked);

  // Strand, under mutex_, writable: frames an `ack` consumer held for an earlier connection go
  // back in front of the queue (after what a failed write put back there), to be written first
  // to this one.
  void redeliver_locked();
  void fell_behind();
  // Publishes the queue's depth and whether it is at its pause mark (for a group's choice).
  void publish_depth_locked() noexcept;
  // Whether frames put now pause the suppliers, and why (`over_budget`: the gateway-wide budget
  // refused the last put's bytes).
  enum class pause_mark : std::uint8_t { none, consumer_full, gateway_behind };
  pause_mark pause_mark_locked(bool over_budget) const noexcept;
  pause_mark spool_pause_mark_locked() const noexcept;
  void publish_pause_mark_locked() noexcept;
  // A congested consumer's policy applied to what it holds (admission.hpp's trim): on becoming
  // congested (fell_behind, on_link_down) and when a write hands frames back to a congested
  // queue, so that its limits are what a dashboard shows, and the ring's slots what it holds
  // (frame_queue::fit_to_hint, dropping policies). Returns the connection the disconnect policy
  // gave up (0: none), for carry_out_policy() to drop.
  std::uint64_t hold_to_limits_locked(admission& a, protocol::release_batch& released);
  // The disconnect policy fired with the link up: no write may start on it from here on.
  std::uint64_t give_up_link_locked() noexcept;
  // Outside the lock: counts what the policy dropped and has the strand drop `slow_conn`.
  void carry_out_policy(const admission& a, std::uint64_t slow_conn);

  // It owes its share of the confirm bound (confirm_share.hpp): full, as at its queue's limits;
  // below half of it, suppliers it paused for that go on. Any thread.
  bool owes_share() const noexcept;
  bool owes_under_half_share() const noexcept;
  // Under mutex_: CONFIRM frames a put() may still give it before a dropping policy refuses
  // them, whatever its flow (unbounded for backpressure: pause_mark_locked() pauses instead).
  std::uint64_t confirm_room_locked() const noexcept;
  // Under mutex_: `n` more CONFIRM frames routed to it (put, take_over).
  void take_confirms_locked(std::uint32_t n) noexcept {
    if (n) stats_.confirms_taken.fetch_add(n, std::memory_order_relaxed);
  }
  // Backpressure: suppliers paused on this consumer leave the list under the lock and are
  // resumed outside it.
  bool below_low_water_locked() const noexcept;
  void resume_if_below_low_water();
  // Strand, outside the lock: a backpressure consumer that became congested tells the suppliers
  // it still keeps paused (collected under the lock into `paused`) that their pause is now its own.
  void tell_stalled(const std::vector<std::weak_ptr<flow_control_listener>>& paused);

  const std::string name_;
  const std::string member_;
  consumer_stats stats_;
  const options opts_;
  runtime::strand strand_;

  // Guards everything down to the strand-only section. One per consumer: puts to different
  // consumers never contend, and it is never held across I/O or a call into other objects.
  mutable std::mutex mutex_;
  frame_queue queue_;
  queue_limits limits_;
  net::endpoint endpoint_;
  // The TLS settings the link dials with (absent: plaintext).
  std::optional<consumer_tls> tls_;
  flow flow_ = flow::disconnected;
  writer writer_ = writer::idle;
  std::uint64_t conn_ = 0;  // the connection writes go to
  paused_suppliers paused_;
  frame_packer packer_;  // a congested consumer's own chunks for sparse frames

  // Read without the lock by capacity() and policy().
  std::atomic<std::uint32_t> capacity_view_;
  std::atomic<overflow_policy> policy_view_;

  // The parts.
  consumer_link link_;                         // strand-only
  strand_drain drain_{strand_, link_, *this};  // the writer
  consumer_acks acks_;                         // strand-only but its limit
  group_membership membership_{strand_, *this, stats_};
  consumer_closing closing_{strand_, *this};  // its life and ending under mutex_, else strand
  consumer_spool spool_;                      // its mode and unread count under mutex_, else strand

  asio::steady_timer grace_timer_;  // strand-only: a refusing consumer's slow_after
};

}  // namespace gatewayd::consumers
