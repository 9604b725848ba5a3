// How a consumer group picks the one member a frame goes to: pure functions over what each
// member shows (live, depth), no lock, no allocation, no socket.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "protocol/frame_chunk.hpp"
#include "runtime/enum_names.hpp"

namespace gatewayd::consumers {

// `balance` of a group ([consumers.NAME] with endpoints = [...]).
enum class balance_policy : std::uint8_t {
  round_robin,   // members in turn
  least_queued,  // the member with the fewest frames waiting (a slow one gets less)
  address,       // rendezvous hash of the frame's address over the live members
};
inline constexpr runtime::enum_names<balance_policy, 3> balance_policy_names{
    {"round-robin", "least-queued", "address"}};
inline std::string_view to_string(balance_policy p) noexcept {
  return balance_policy_names(p);
}

// One member as the choice sees it, read once per put batch from relaxed atomics.
struct member_view {
  bool connected = false;   // its link is up
  bool live = false;        // connected and keeping up (not congested), or under backpressure
  bool room = false;        // frames put now would not pause the suppliers (below its pause mark)
  std::uint64_t depth = 0;  // frames queued, plus what this batch already gave it
  std::uint64_t seed = 0;   // hash of its endpoint: its rendezvous identity
};

// Which members a frame may go to: the live ones with room, else the live ones, else the
// connected ones (all behind: each holds frames under its limits and policy, and writes them
// as it can), else all (no member up: they hold frames until one comes up and takes them).
// `address` never skips a live member for want of room, so that an address stays on its member.
enum class candidates : std::uint8_t { live_with_room, live, connected, all };
candidates pick_candidates(std::span<const member_view> members, balance_policy policy) noexcept;
bool eligible(const member_view& m, candidates c) noexcept;

// The member index for one frame. `turn`: the group's round-robin count for this frame;
// `address_hash`: hash_address() of its address. `skip`: a member never chosen (the one
// handing its frames over), or members.size() for none; at least one other must be eligible.
std::size_t choose_member(std::span<const member_view> members, balance_policy policy, candidates c,
                          std::uint64_t turn, std::uint64_t address_hash,
                          std::size_t skip) noexcept;

// The address of a queued frame (protocol::frame_address).
std::string_view frame_address(const protocol::frame_slice& f) noexcept;
std::uint64_t hash_address(std::string_view address) noexcept;
// A member's rendezvous identity, from its endpoint text: stable across reloads and restarts.
std::uint64_t member_seed(std::string_view endpoint) noexcept;

}  // namespace gatewayd::consumers
