#include "tools/traffic/frame_batch.hpp"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <stdexcept>

#include "protocol/frame_codec.hpp"
#include "tools/traffic/payload.hpp"

namespace gatewayd::traffic {

frame_batch::frame_batch(std::vector<std::string> addresses, std::size_t payload_size,
                         std::uint16_t sender, std::size_t max_frames, std::size_t max_bytes,
                         std::uint8_t flags, std::uint32_t spread)
    : addresses_(std::move(addresses)),
      sender_(sender),
      next_sequence_(addresses_.size(), 0),
      spread_(spread) {
  const std::size_t k = addresses_.size();
  if (k == 0 || k > max_streams) throw std::invalid_argument("frame_batch: 1..256 addresses");
  if (payload_size < header_size) throw std::invalid_argument("frame_batch: payload too small");
  if (spread > max_spread) throw std::invalid_argument("frame_batch: spread too large");
  if (spread) {
    for (auto& a : addresses_)
      a += '.' + std::string(spread_digits, '0');
  }
  std::string payload(payload_size, '\0');
  fill_payload(payload.data(), payload.size());
  std::vector<std::string> cycle;
  std::size_t cycle_bytes = 0;
  for (const auto& a : addresses_) {
    cycle.push_back(protocol::encode_frame(a, payload, flags));
    cycle_bytes += cycle.back().size();
  }
  const std::size_t by_bytes = std::max<std::size_t>(1, max_bytes * k / cycle_bytes);
  capacity_ = std::clamp<std::size_t>(by_bytes, 1, std::max<std::size_t>(max_frames, 1));
  const std::size_t frames = capacity_ + k - 1;
  bytes_.reserve(frames * (cycle_bytes / k + k));
  for (std::size_t j = 0; j < frames; ++j) {
    frame_at_.push_back(bytes_.size());
    header_at_.push_back(bytes_.size() + protocol::header_size + addresses_[j % k].size());
    bytes_ += cycle[j % k];
  }
  frame_at_.push_back(bytes_.size());
}

void frame_batch::renumber(std::uint16_t sender) noexcept {
  sender_ = sender;
  std::fill(next_sequence_.begin(), next_sequence_.end(), 0);
  stamped_ = 0;
  spread_next_ = 0;
  std::fill(std::begin(spread_digits_), std::end(spread_digits_), '0');
}

std::string_view frame_batch::next(std::size_t n, std::uint64_t send_ns) noexcept {
  const std::size_t k = addresses_.size();
  const auto first = static_cast<std::size_t>(stamped_ % k);
  n = std::clamp<std::size_t>(n, 1, capacity_);
  std::size_t stream = first;
  for (std::size_t j = first; j < first + n; ++j) {
    store_header(bytes_.data() + header_at_[j],
                 payload_header{send_ns, next_sequence_[stream]++,
                                static_cast<std::uint8_t>(stream), sender_});
    if (spread_) {
      std::memcpy(bytes_.data() + header_at_[j] - spread_digits, spread_digits_, spread_digits);
      advance_spread();
    }
    if (++stream == k) stream = 0;
  }
  stamped_ += n;
  return {bytes_.data() + frame_at_[first], frame_at_[first + n] - frame_at_[first]};
}

void frame_batch::append_frame(std::string& out, const payload_header& h) const {
  // Frames 0..k-1 of the buffer are streams 0..k-1; only their headers change between stamps.
  const std::size_t at = out.size();
  out.append(bytes_, frame_at_[h.stream], frame_at_[h.stream + 1] - frame_at_[h.stream]);
  char* header = out.data() + at + (header_at_[h.stream] - frame_at_[h.stream]);
  store_header(header, h);
  if (spread_) stamp_spread(header, h.sequence * addresses_.size() + h.stream);
}

void frame_batch::advance_spread() noexcept {
  if (++spread_next_ == spread_) {
    spread_next_ = 0;
    std::fill(std::begin(spread_digits_), std::end(spread_digits_), '0');
    return;
  }
  for (std::size_t d = spread_digits; d-- > 0;) {
    if (spread_digits_[d] != '9') {
      ++spread_digits_[d];
      return;
    }
    spread_digits_[d] = '0';
  }
}

void frame_batch::stamp_spread(char* end, std::uint64_t index) const noexcept {
  auto number = static_cast<std::uint32_t>(index % spread_);
  for (std::size_t d = 1; d <= spread_digits; ++d) {
    end[-static_cast<std::ptrdiff_t>(d)] = static_cast<char>('0' + number % 10);
    number /= 10;
  }
}

}  // namespace gatewayd::traffic
