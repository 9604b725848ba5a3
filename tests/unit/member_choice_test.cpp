// consumers/member_choice: how a group picks a member per frame (round-robin, least-queued,
// rendezvous by address), what counts as a candidate, and the address read from a frame.
#include <boost/test/unit_test.hpp>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "consumers/member_choice.hpp"
#include "protocol/frame_codec.hpp"

using namespace gatewayd::consumers;

namespace {

std::vector<member_view> members(std::size_t n) {
  std::vector<member_view> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = {.connected = true,
            .live = true,
            .room = true,
            .depth = 0,
            .seed = member_seed("127.0.0.1:" + std::to_string(7500 + i))};
  return v;
}

std::size_t pick(const std::vector<member_view>& v, balance_policy p, std::uint64_t turn,
                 std::string_view address = "a", std::size_t skip = ~std::size_t{0}) {
  return choose_member(v, p, pick_candidates(v, p), turn, hash_address(address),
                       skip == ~std::size_t{0} ? v.size() : skip);
}

}  // namespace

BOOST_AUTO_TEST_CASE(round_robin_takes_turns_and_passes_over_members_that_are_down) {
  auto v = members(3);
  for (std::uint64_t t = 0; t < 6; ++t)
    BOOST_TEST(pick(v, balance_policy::round_robin, t) == t % 3);
  v[1].live = false;
  std::map<std::size_t, int> got;
  for (std::uint64_t t = 0; t < 300; ++t)
    ++got[pick(v, balance_policy::round_robin, t)];
  BOOST_TEST(got.count(1) == 0u);
  BOOST_TEST(got[0] + got[2] == 300);
  // Its turns are shared by the others, not all given to its neighbour (200 : 100 before).
  BOOST_TEST(got[0] == 150);
  BOOST_TEST(got[2] == 150);
  // A live member without room is passed over while another has room.
  v[1].live = true;
  v[2].room = false;
  for (std::uint64_t t = 0; t < 30; ++t)
    BOOST_TEST(pick(v, balance_policy::round_robin, t) != 2u);
}

BOOST_AUTO_TEST_CASE(every_member_behind_means_the_connected_ones_take_the_frames) {
  auto v = members(3);
  for (auto& m : v)
    m.live = false;
  v[1].connected = false;  // down: it holds nothing new while others are up, if behind
  BOOST_TEST((pick_candidates(v, balance_policy::round_robin) == candidates::connected));
  std::map<std::size_t, int> got;
  for (std::uint64_t t = 0; t < 300; ++t)
    ++got[pick(v, balance_policy::round_robin, t)];
  BOOST_TEST(got.count(1) == 0u);
  BOOST_TEST(got[0] == 150);
  BOOST_TEST(got[2] == 150);
  for (int k = 0; k < 100; ++k)
    BOOST_TEST(pick(v, balance_policy::address, 0, "k." + std::to_string(k)) != 1u);
}

BOOST_AUTO_TEST_CASE(nobody_up_means_every_member_holds_in_turn) {
  auto v = members(3);
  for (auto& m : v) {
    m.live = false;
    m.connected = false;
  }
  BOOST_TEST((pick_candidates(v, balance_policy::round_robin) == candidates::all));
  for (std::uint64_t t = 0; t < 6; ++t)
    BOOST_TEST(pick(v, balance_policy::round_robin, t) == t % 3);
}

BOOST_AUTO_TEST_CASE(least_queued_picks_the_shortest_queue) {
  auto v = members(3);
  v[0].depth = 10;
  v[1].depth = 3;
  v[2].depth = 7;
  BOOST_TEST(pick(v, balance_policy::least_queued, 0) == 1u);
  v[1].live = false;
  BOOST_TEST(pick(v, balance_policy::least_queued, 0) == 2u);
}

BOOST_AUTO_TEST_CASE(address_is_stable_and_a_death_moves_only_its_addresses) {
  auto v = members(3);
  std::map<std::string, std::size_t> first;
  std::map<std::size_t, int> load;
  for (int k = 0; k < 3000; ++k) {
    const std::string a = "k." + std::to_string(k);
    first[a] = pick(v, balance_policy::address, k, a);
    BOOST_TEST(pick(v, balance_policy::address, k + 17, a) == first[a]);  // turn plays no part
    ++load[first[a]];
  }
  for (std::size_t i = 0; i < 3; ++i)
    BOOST_TEST(std::abs(load[i] - 1000) < 150);
  // Full members keep their addresses.
  v[0].room = false;
  for (const auto& [a, m] : first)
    BOOST_TEST(pick(v, balance_policy::address, 0, a) == m);
  v[0].room = true;
  v[2].live = false;
  for (const auto& [a, m] : first) {
    const std::size_t now = pick(v, balance_policy::address, 0, a);
    if (m != 2) BOOST_TEST(now == m);
    BOOST_TEST(now != 2u);
  }
}

BOOST_AUTO_TEST_CASE(a_handover_never_chooses_the_member_handing_over) {
  auto v = members(2);
  v[0].live = false;
  for (std::uint64_t t = 0; t < 10; ++t) {
    BOOST_TEST(pick(v, balance_policy::round_robin, t, "a", 0) == 1u);
    BOOST_TEST(pick(v, balance_policy::address, t, "k." + std::to_string(t), 0) == 1u);
  }
}

BOOST_AUTO_TEST_CASE(frame_address_reads_the_header) {
  const std::string bytes = gatewayd::protocol::encode_frame("orders.eu.created", "payload");
  auto* chunk = gatewayd::protocol::frame_chunk::acquire();
  std::memcpy(chunk->data(), bytes.data(), bytes.size());
  const gatewayd::protocol::frame_slice f{chunk, 0, static_cast<std::uint32_t>(bytes.size())};
  BOOST_TEST(frame_address(f) == "orders.eu.created");
  chunk->release();
}
