// A confirm-mode supplier's frames not yet settled: their headers (a resend regenerates each
// frame byte for byte from it), their numbers on the current connection, and the gateway's
// confirms and rejects checked against the contract. Pure bookkeeping: no sockets, no clock.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "protocol/control_message.hpp"
#include "runtime/enum_names.hpp"
#include "tools/traffic/payload_header.hpp"

namespace gatewayd::traffic {

// A control message that breaks the contract ("Confirms and acknowledgements"): the connection
// cannot be trusted any more.
enum class confirm_fault : std::uint8_t {
  none,
  confirm_went_back,    // a confirm N below an earlier one
  confirm_ahead,        // a confirm N above the frames sent on this connection
  reject_out_of_range,  // a reject n already confirmed, or not sent on this connection
  rejected_twice,       // a second reject for the same frame
  not_for_a_supplier,   // an `ack`: a consumer's message
};
inline constexpr runtime::enum_names<confirm_fault, 6> confirm_fault_names{
    {"none", "confirm_went_back", "confirm_ahead", "reject_out_of_range", "rejected_twice",
     "not_for_a_supplier"}};
inline std::string_view to_string(confirm_fault f) noexcept {
  return confirm_fault_names(f);
}

class confirm_window {
 public:
  // Holds at most `capacity` (>= 1) frames sent and not yet covered by a confirm.
  explicit confirm_window(std::size_t capacity);

  std::size_t capacity() const noexcept { return ring_.size(); }
  // Frames held: sent (on this connection or an earlier one) and not yet covered by a confirm.
  // Rejected ones stay until the confirm that covers them, as the gateway counts them.
  std::size_t held() const noexcept { return size_; }
  std::size_t room() const noexcept { return ring_.size() - size_; }
  // Frames held that this connection has not been sent yet: they go first, in their order.
  std::size_t to_resend() const noexcept { return size_ - sent_here_; }
  // Frames held neither confirmed nor rejected: what would be lost if we stopped now.
  std::size_t unsettled() const noexcept { return size_ - rejected_held_; }

  // A new frame, numbered next on this connection (call only with room() > 0 and nothing left
  // to resend, just before writing it).
  void add(const payload_header& h) noexcept;
  // The i-th frame still to resend on this connection (i < to_resend()).
  const payload_header& resend_at(std::size_t i) const noexcept {
    return at(sent_here_ + i).header;
  }
  // The first `n` of them are numbered on this connection (just before writing them).
  void resent(std::size_t n) noexcept;

  // A message the gateway sent on this connection.
  confirm_fault on_message(const protocol::control_message& m) noexcept;

  // A new connection: the rejected frames held are settled and let go; the others are
  // numbered 1, 2, ... on it again, in their order, as they are resent.
  void new_connection() noexcept;

  // Every frame given to add(), once: confirmed + rejected + unsettled().
  std::uint64_t added() const noexcept { return added_; }
  std::uint64_t resends() const noexcept { return resends_; }      // resent() frames, each time
  std::uint64_t confirmed() const noexcept { return confirmed_; }  // settled, not rejected
  std::uint64_t rejected() const noexcept;
  // By reason: index r - 1 for reject_reason r.
  const std::array<std::uint64_t, protocol::reject_reason_count>& rejected_by_reason()
      const noexcept {
    return rejected_;
  }

 private:
  struct entry {
    payload_header header;
    bool rejected = false;
  };
  entry& at(std::size_t i) noexcept { return ring_[(head_ + i) % ring_.size()]; }
  const entry& at(std::size_t i) const noexcept { return ring_[(head_ + i) % ring_.size()]; }

  std::vector<entry> ring_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
  std::size_t sent_here_ = 0;      // held frames [0, sent_here_) went out on this connection
  std::size_t rejected_held_ = 0;  // held frames marked rejected
  // On this connection: the frames numbered so far and the last confirm. Held frame i carries
  // number confirmed_here_ + 1 + i.
  std::uint64_t numbered_here_ = 0;
  std::uint64_t confirmed_here_ = 0;
  std::uint64_t added_ = 0;
  std::uint64_t resends_ = 0;
  std::uint64_t confirmed_ = 0;
  std::array<std::uint64_t, protocol::reject_reason_count> rejected_{};
};

}  // namespace gatewayd::traffic
