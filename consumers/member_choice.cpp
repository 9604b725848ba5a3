#include "consumers/member_choice.hpp"

#include "protocol/frame_codec.hpp"
#include "runtime/hash.hpp"

namespace gatewayd::consumers {

candidates pick_candidates(std::span<const member_view> members, balance_policy policy) noexcept {
  bool live = false;
  bool connected = false;
  for (const auto& m : members) {
    if (m.live && (m.room || policy == balance_policy::address)) return candidates::live_with_room;
    live = live || m.live;
    connected = connected || m.connected;
  }
  return live ? candidates::live : connected ? candidates::connected : candidates::all;
}

bool eligible(const member_view& m, candidates c) noexcept {
  switch (c) {
    case candidates::live_with_room:
      return m.live && m.room;
    case candidates::live:
      return m.live;
    case candidates::connected:
      return m.connected;
    case candidates::all:
      return true;
  }
  return true;
}

std::size_t choose_member(std::span<const member_view> members, balance_policy policy, candidates c,
                          std::uint64_t turn, std::uint64_t address_hash,
                          std::size_t skip) noexcept {
  const std::size_t n = members.size();
  // Address: every live member counts, full or not (its addresses stay on it).
  if (policy == balance_policy::address && c == candidates::live_with_room) c = candidates::live;
  std::size_t best = n;
  switch (policy) {
    case balance_policy::round_robin: {
      // Member turn % n when it is eligible (plain turns while all are); an ineligible one's
      // turns are spread over the eligible ones (the (turn % k)-th of k), not all given to its
      // neighbour.
      const std::size_t start = static_cast<std::size_t>(turn % n);
      if (start != skip && eligible(members[start], c)) return start;
      std::size_t k = 0;
      for (std::size_t i = 0; i < n; ++i)
        k += i != skip && eligible(members[i], c);
      if (k == 0) break;
      std::size_t pick = static_cast<std::size_t>(turn % k);
      for (std::size_t i = 0; i < n; ++i) {
        if (i == skip || !eligible(members[i], c)) continue;
        if (pick-- == 0) return i;
      }
      break;
    }
    case balance_policy::least_queued: {
      const std::size_t start = static_cast<std::size_t>(turn % n);  // ties go round
      for (std::size_t k = 0; k < n; ++k) {
        const std::size_t i = start + k < n ? start + k : start + k - n;
        if (i == skip || !eligible(members[i], c)) continue;
        if (best == n || members[i].depth < members[best].depth) best = i;
      }
      break;
    }
    case balance_policy::address: {
      std::uint64_t top = 0;
      for (std::size_t i = 0; i < n; ++i) {
        if (i == skip || !eligible(members[i], c)) continue;
        const std::uint64_t score = runtime::mix(address_hash ^ members[i].seed);
        if (best == n || score > top) {
          best = i;
          top = score;
        }
      }
      break;
    }
  }
  if (best != n) return best;
  // Nobody eligible but the skipped one: any other member.
  for (std::size_t i = 0; i < n; ++i) {
    if (i != skip) return i;
  }
  return 0;
}

std::string_view frame_address(const protocol::frame_slice& f) noexcept {
  return protocol::frame_address({f.data(), f.size});
}

std::uint64_t hash_address(std::string_view address) noexcept {
  return runtime::hash_bytes(address);
}

std::uint64_t member_seed(std::string_view endpoint) noexcept {
  return runtime::mix(runtime::hash_bytes(endpoint) + 0x632be59bd9b4e019ULL);
}

}  // namespace gatewayd::consumers
