// The segment log's bytes on disk (segment_log.hpp describes them): record and head encoding.
// Private to segment_log*.cpp.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <system_error>

#include "runtime/crc32c.hpp"

namespace gatewayd::consumers::segment_log_format {

inline constexpr std::uint64_t no_segment = std::numeric_limits<std::uint64_t>::max();
// A new log's first segment: prepend() numbers its segments downwards from here, so 2^40 of
// them fit before segment 0 (appends number upwards: 2^64 - 2^40 more).
inline constexpr std::uint64_t first_segment = std::uint64_t{1} << 40;
inline constexpr std::size_t read_ahead = std::size_t{1} << 20;
inline constexpr std::size_t head_slot_stride = 512;  // one slot per disk sector
inline constexpr std::size_t head_file_bytes = 2 * head_slot_stride;

inline std::error_code last_error() noexcept {
  return {errno, std::system_category()};
}

// [u32 length][u32 crc32c of length, time, payload][i64 time ms][payload], host byte order.
// The time and the payload follow each other: two runs for the checksum.
inline std::uint32_t record_crc(const std::byte* rec, std::uint32_t length) noexcept {
  return runtime::crc32c(runtime::crc32c(0, rec, 4), rec + 8, 8 + std::size_t{length});
}

inline void encode(std::byte* rec, std::span<const std::byte> payload, std::int64_t ms) noexcept {
  const auto length = static_cast<std::uint32_t>(payload.size());
  std::memcpy(rec, &length, 4);
  std::memcpy(rec + 8, &ms, 8);
  if (!payload.empty()) std::memcpy(rec + 16, payload.data(), payload.size());
  const std::uint32_t crc = record_crc(rec, length);
  std::memcpy(rec + 4, &crc, 4);
}

inline std::uint32_t length_of(const std::byte* rec) noexcept {
  std::uint32_t v;
  std::memcpy(&v, rec, 4);
  return v;
}

inline std::int64_t ms_of(const std::byte* rec) noexcept {
  std::int64_t v;
  std::memcpy(&v, rec + 8, 8);
  return v;
}

// Whether a whole record (header and the payload its length says) holds its checksum.
inline bool checks(const std::byte* rec) noexcept {
  std::uint32_t crc;
  std::memcpy(&crc, rec + 4, 4);
  return crc == record_crc(rec, length_of(rec));
}

// A prepended segment (segment_log_prepend.cpp) opens with one resume record: a record whose
// time is resume_ms (no clock gives it) and whose 16-byte payload is [u64 segment][u64 offset],
// where reading goes on after this segment: the next segment's first record still held when
// the prepend was made (what came before it there was consumed). The head starts past it.
inline constexpr std::int64_t resume_ms = std::numeric_limits<std::int64_t>::min();
inline constexpr std::size_t resume_payload_bytes = 16;
inline constexpr std::size_t resume_record_bytes = 16 + resume_payload_bytes;

inline void encode_resume(std::byte* rec, std::uint64_t segment, std::uint64_t offset) noexcept {
  std::byte payload[resume_payload_bytes];
  std::memcpy(payload, &segment, 8);
  std::memcpy(payload + 8, &offset, 8);
  encode(rec, payload, resume_ms);
}

// Whether the resume_record_bytes at `rec` are a whole resume record; its target if so.
inline bool decode_resume(const std::byte* rec, std::uint64_t& segment,
                          std::uint64_t& offset) noexcept {
  if (length_of(rec) != resume_payload_bytes || ms_of(rec) != resume_ms || !checks(rec))
    return false;
  std::memcpy(&segment, rec + 16, 8);
  std::memcpy(&offset, rec + 24, 8);
  return true;
}

struct head_slot {
  std::uint64_t generation = 0;  // 0: never written
  std::uint64_t segment = 0;
  std::uint64_t offset = 0;
  std::uint32_t crc = 0;  // crc32c of the three fields above
  std::uint32_t unused = 0;
};
static_assert(sizeof(head_slot) == 32);

inline std::uint32_t slot_crc(const head_slot& s) noexcept {
  return runtime::crc32c(0, &s, 24);
}

inline head_slot make_head_slot(std::uint64_t generation, std::uint64_t segment,
                                std::uint64_t offset) noexcept {
  head_slot s{generation, segment, offset, 0, 0};
  s.crc = slot_crc(s);
  return s;
}

inline bool valid(const head_slot& s) noexcept {
  return s.generation != 0 && s.crc == slot_crc(s);
}

}  // namespace gatewayd::consumers::segment_log_format
