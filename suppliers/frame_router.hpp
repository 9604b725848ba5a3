// Routes the frames of one read to their consumers: looks each address up in the current
// snapshot, batches slices per consumer, and hands each consumer its batch in one put().
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "protocol/confirm_ledger.hpp"
#include "protocol/frame_chunk.hpp"
#include "routing/route_cache.hpp"
#include "routing/routing_table.hpp"
#include "suppliers/route_readers.hpp"
#include "suppliers/route_snapshot.hpp"

namespace gatewayd::suppliers {

// One per routing thread (frame_routers keeps them): a session's read is routed and flushed
// inside one handler on one thread, so the scratch space (batches, lookup cache) is shared by
// all sessions of that thread instead of costing every idle connection its own. Used by one
// thread at a time.
class frame_router {
 public:
  // Its passes are announced in `readers` (their owner retires consumers by them).
  explicit frame_router(route_readers& readers) : reading_(readers) {}
  ~frame_router();
  frame_router(const frame_router&) = delete;
  frame_router& operator=(const frame_router&) = delete;

  // Slices (a frame for one consumer) a pass may hold before its session hands them over:
  // each consumer's batch keeps its storage for the next pass, so what a pass fans out stays
  // allocated in every routing thread. Bounded by bytes read alone (a 1 MiB pass of 141-byte
  // frames for 1,000 consumers is 7.4 million slices, 178 MB, per thread), the scratch kept
  // 310-505 MiB after a burst had drained (issue 42). With this bound a pass ends after the
  // read that reaches it: a consumer's batch holds about one read's frames at most when the
  // fan-out is wide, and as many as before when it is narrow (the read budget ends those first).
  static constexpr std::size_t pass_slices = 64 * 1024;
  // Slices routed in the open pass (the session ends it between reads at pass_slices).
  std::size_t slices() const noexcept { return slices_; }
  // Bytes the routers' per-consumer batches hold allocated, all threads together: counted
  // once a pass (never per frame), for the slot memory gauge.
  static std::size_t scratch_bytes() noexcept;

  // Starts a pass by the newest table in `routes`; flush() ends it. While a pass is open a
  // reload does not close the consumers its table names.
  void begin_pass(const route_snapshot_holder& routes);

  enum class outcome : std::uint8_t {
    routed,         // queued for every consumer a route of its address names
    unroutable,     // no route matched: queued for the dead letter if there is one, else dropped
    not_permitted,  // the supplier's publish rule refuses the address: dropped, routed nowhere
  };
  // Queues `slice` for every consumer its address routes to, if the supplier (below) may
  // publish to it. One route-cache probe answers both; a rule that allows everything costs a
  // branch.
  outcome route(std::string_view address, const protocol::frame_slice& slice);
  // The same for a CONFIRM frame: numbered in `ledger`, owed by each consumer it is queued for
  // (the dead letter counts as one, through its entry); refused, or routed to no consumer, it is
  // rejected at read, taking no entry. `numbered` is false when the ledger is full (the caller
  // checks room before each read: it never is).
  outcome route_confirmed(std::string_view address, protocol::frame_slice slice,
                          protocol::confirm_ledger& ledger, bool& numbered);

  // The supplier whose frames follow (its TLS identity; empty for none): picks its publish
  // rule in this pass's snapshot. Once per read, not per frame.
  void supplier(std::string_view identity) noexcept;
  // Counts `n` frames of that supplier refused by route(), under its rule's name.
  void count_not_permitted(std::uint64_t n) noexcept {
    if (permissions_) permissions_->count_not_permitted(who_.rule, n);
  }

  // Takes the chunk references the frames routed so far need. Call before the stream may let
  // go of their chunk (its next read): until then they are only counted.
  void hold() noexcept;

  struct flush_result {
    bool pause = false;               // some consumer asked the supplier to stop reading
    bool paused_by_consumer = false;  // one a stalled backpressure consumer (put_result)
    bool handed_off = false;          // the writes were left to another thread
  };
  // Takes the references still pending and hands every consumer its batch: one put() per
  // consumer for everything routed in the pass, however many reads that spans. Adds the
  // pass's route hits to the snapshot's counters. Ends the pass.
  // `write_here`: this thread writes the batches (one hop, nobody woken); false posts the
  // consumers' writes to their strands (handed_off unless one was already writing here), so the
  // caller can read on while another thread writes. The caller decides: it knows how busy its
  // pass was and whether a thread is idle to take the writes.
  flush_result flush(const std::shared_ptr<consumers::flow_control_listener>& listener,
                     bool write_here = true);

 private:
  void refresh(const route_snapshot_holder& routes);
  // Queues `slice` for each of `consumers`, counting the references to take.
  void fan_out(std::span<const routing::consumer_index> consumers,
               const protocol::frame_slice& slice);
  // Route hits: route() counts each frame on this thread's counters of its patterns; the totals
  // reach the snapshot's atomic counters once per flush, not once per frame.
  void credit(std::span<const routing::pattern_index> patterns) noexcept;
  void publish_hits() noexcept;

  route_readers::slot reading_;
  const route_snapshot_holder* holder_ = nullptr;
  std::shared_ptr<const route_snapshot> snapshot_;
  std::uint64_t version_ = 0;
  routing::lookup_scratch scratch_;
  routing::route_cache cache_;
  std::vector<std::vector<protocol::frame_slice>> batches_;  // by consumer index
  std::size_t slices_ = 0;                                   // in them, this pass
  std::vector<std::size_t> counted_slots_;  // each batch's capacity as scratch_bytes() has it
  consumers::group_scratch group_scratch_;  // where a group splits its batch by member
  std::vector<routing::consumer_index> touched_;
  protocol::frame_chunk* refs_chunk_ = nullptr;  // chunk whose pending references are not yet taken
  std::uint32_t pending_refs_ = 0;
  std::vector<std::uint64_t> pattern_hits_;  // by pattern, this pass
  std::vector<routing::pattern_index> touched_patterns_;
  // The publish rule in force: what route() asks the cache beside the route (no permissions
  // when the rule allows everything).
  const routing::publish_permissions* permissions_ = nullptr;
  routing::publish_check who_;
};

}  // namespace gatewayd::suppliers
