// Incremental GWP/1 decoder over shared chunks: bytes arrive in arbitrary pieces, whole
// frames come out as slices of reference-counted chunks, a partial frame waits for more.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "protocol/address.hpp"
#include "protocol/frame_chunk.hpp"
#include "protocol/frame_codec.hpp"
#include "runtime/byte_budget.hpp"
#include "runtime/hash.hpp"

namespace gatewayd::protocol {

class frame_stream {
 public:
  // Reads smaller than this are not worth a syscall; the chunk moves on instead.
  static constexpr std::size_t min_read = 16 * 1024;

  // With a budget, what a frame larger than a standard chunk holds beyond one chunk while it
  // arrives is taken from it (the stream's own share, given back when it lets the buffer go).
  // `accept`: the flags this stream's frames may carry (supplier_frames: data and CONFIRM).
  explicit frame_stream(std::uint32_t max_payload, runtime::byte_budget* budget = nullptr,
                        flag_policy accept = data_frames) noexcept
      : max_payload_(max_payload), budget_(budget), accept_(accept) {}
  ~frame_stream() { set_charge(0); }
  frame_stream(const frame_stream&) = delete;
  frame_stream& operator=(const frame_stream&) = delete;

  struct buffer {
    char* data;
    std::size_t size;
  };
  // Writable space for the next read, at least min_read bytes: for a frame that fits a
  // standard chunk, room for all of its remaining bytes; for a larger one (its size checked
  // against max_payload first), room for about as much again as it has buffered. Empty
  // (size 0) only when the budget refused that growth: the frame cannot be received now.
  buffer prepare();
  // `n` bytes were written into the last prepare()d space.
  void commit(std::size_t n) noexcept { end_ += n; }

  struct stream_error {
    frame_error reason = frame_error::none;
    std::uint64_t offset = 0;  // byte offset in the whole stream
    explicit operator bool() const noexcept { return reason != frame_error::none; }
  };

  // Calls on_frame(const frame_view&, const frame_slice&) for each whole frame committed so
  // far. On bad input it stops and returns the error; frames before it were all delivered.
  template <class OnFrame>
  stream_error parse(OnFrame&& on_frame);

  // Lets go of the chunk when no partial frame needs it (idle sessions then hold no buffer):
  // a chunk with room left is parked for the next read on this thread (frame_chunk::park_tail).
  void release_if_idle() noexcept;

  bool has_partial() const noexcept { return begin_ != end_; }
  // The size of the frame being received, once its header is in (the header size before).
  std::size_t pending_frame_size() const noexcept { return needed_; }
  std::size_t buffered() const noexcept { return end_ - begin_; }
  // Bytes of the stream parsed into frames so far.
  std::uint64_t offset() const noexcept { return consumed_before_ + begin_; }
  frame_chunk* chunk() const noexcept { return chunk_.get(); }

 private:
  // Moves the pending bytes to a new chunk that holds `charge` bytes of the budget (what a
  // large frame's buffer exceeds a standard chunk by; 0 for the rest). False, changing
  // nothing, when the budget refuses.
  bool move_to_new_chunk(std::size_t capacity, std::size_t charge);
  // Holds `bytes` of the budget (what the current chunk exceeds a standard one by).
  bool set_charge(std::size_t bytes) noexcept;

  std::uint32_t max_payload_;
  runtime::byte_budget* budget_;
  flag_policy accept_;
  std::size_t charged_ = 0;  // of budget_, for chunk_
  chunk_ptr chunk_;
  std::size_t begin_ = 0;              // first byte not yet parsed into a frame
  std::size_t end_ = 0;                // first byte not yet written
  std::size_t needed_ = header_size;   // bytes the frame at begin_ needs in all
  std::uint64_t consumed_before_ = 0;  // stream bytes that lived in earlier chunks
  // The last address validated: a frame carrying the same bytes needs only its fixed header
  // checked (a supplier usually repeats one address frame after frame), and one whose address
  // shares its first bytes only the bytes after them (t.x.00000001, t.x.00000002, ...).
  static constexpr std::size_t known_address_capacity = 64;
  char known_address_[known_address_capacity] = {};
  std::size_t known_address_length_ = 0;  // 0 = none (addresses are never empty)

  // The frame at `p` (with `n` bytes available) if it is whole, well-formed and its address
  // fits known_address_, which it then becomes; its size, or 0 to let parse_frame() decide
  // (and name the error, if any).
  std::size_t known_frame_size(const char* p, std::size_t n) noexcept;
  // The `a` bytes at `address` differ from known_address_. When the bytes after those they share
  // with it are all token bytes, they become known_address_ and `a` is returned; otherwise the
  // offset before which they begin a valid address (for learn_checked_address). Out of line, so
  // that the loop over repeated addresses stays tight.
  std::size_t learn_address(const char* address, std::size_t a) noexcept;
  // The full check past the first `valid` bytes (a dot or a bad byte after the shared part):
  // true, and they become known_address_, when the `a` bytes are a valid address.
  bool learn_checked_address(const char* address, std::size_t a, std::size_t valid) noexcept;
  // known_address_ becomes the `a` bytes at `address`, of which the first `same` are its own
  // already. Whole loads, no memcpy call: a tail within the last word (the usual case) is one
  // word's copy.
  void keep_address(const char* address, std::size_t a, std::size_t same) noexcept {
    const auto copy = [&](std::size_t at, auto word) {
      std::memcpy(&word, address + at, sizeof word);
      std::memcpy(known_address_ + at, &word, sizeof word);
    };
    if (a >= 8) {
      if (a - same > 8) {
        for (std::size_t i = same & ~std::size_t{7}; i + 8 < a; i += 8)
          copy(i, std::uint64_t{});
      }
      copy(a - 8, std::uint64_t{});
    } else if (a >= 4) {
      copy(0, std::uint32_t{});
      copy(a - 4, std::uint32_t{});
    } else {
      for (std::size_t i = 0; i < a; ++i)
        copy(i, char{});
    }
    known_address_length_ = a;
  }
};

inline std::size_t frame_stream::known_frame_size(const char* p, std::size_t n) noexcept {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  if (n < header_size) return 0;
  const std::size_t a = u[5];
  // Magic, version, flags and the 16-bit address length, as parse_frame() checks them.
  if (u[0] != magic_0 || u[1] != magic_1 || u[2] != protocol_version || !accept_.accepts(u[3]) ||
      u[4] != 0 || a == 0 || a > known_address_capacity)
    return 0;
  const std::uint32_t payload = (std::uint32_t{u[6]} << 24) | (std::uint32_t{u[7]} << 16) |
                                (std::uint32_t{u[8]} << 8) | std::uint32_t{u[9]};
  if (payload > max_payload_) return 0;
  const std::size_t size = header_size + a + payload;
  if (n < size) return 0;
  const char* address = p + header_size;
  // Word compares inline: a memcmp call would cost more than the rest of this check.
  if (a == known_address_length_ && runtime::same_bytes(address, known_address_, a)) return size;
  if (const std::size_t valid = learn_address(address, a);
      valid != a && !learn_checked_address(address, a, valid))
    return 0;
  return size;
}

template <class OnFrame>
frame_stream::stream_error frame_stream::parse(OnFrame&& on_frame) {
  const char* base = chunk_ ? chunk_->data() : nullptr;
  while (begin_ < end_) {
    if (const std::size_t size = known_frame_size(base + begin_, end_ - begin_)) {
      const char* p = base + begin_;
      const frame_view f{
          {p + header_size, known_address_length_},
          {p + header_size + known_address_length_, size - header_size - known_address_length_},
          {p, size},
          static_cast<std::uint8_t>(p[3])};
      const frame_slice slice{chunk_.get(), static_cast<std::uint32_t>(begin_),
                              static_cast<std::uint32_t>(size)};
      begin_ += size;
      on_frame(f, slice);
      continue;
    }
    const parse_result r = parse_frame({base + begin_, end_ - begin_}, max_payload_, accept_,
                                       {known_address_, known_address_length_});
    if (r.state == parse_result::status::need_more) {
      needed_ = r.needed;
      return {};
    }
    if (r.state == parse_result::status::error) {
      return {r.error, offset() + r.error_offset};
    }
    const frame_slice slice{chunk_.get(), static_cast<std::uint32_t>(begin_),
                            static_cast<std::uint32_t>(r.frame.bytes.size())};
    if (r.frame.address.size() <= known_address_capacity) {
      keep_address(r.frame.address.data(), r.frame.address.size(), 0);
    }
    begin_ += r.frame.bytes.size();
    on_frame(r.frame, slice);
  }
  needed_ = header_size;
  return {};
}

}  // namespace gatewayd::protocol
