// CRC32C (Castagnoli, RFC 3720): the spool's record checksum. SSE4.2 when the CPU has it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gatewayd::runtime {

// Extends `crc` (the result of an earlier call, or 0 to start) over n bytes at p, so
// crc32c(crc32c(0, a), b) == crc32c(0, a + b); crc32c(0, "123456789", 9) == 0xE3069283.
// On x86-64 the first call picks the SSE4.2 crc32 instruction if the CPU has it (checked once
// at run time; the rest of the program is not built for SSE4.2), else the table below.
std::uint32_t crc32c(std::uint32_t crc, const void* p, std::size_t n) noexcept;

// The table-driven path (slicing-by-8), whatever the CPU: the fallback, and what the tests
// hold the instruction to.
std::uint32_t crc32c_portable(std::uint32_t crc, const void* p, std::size_t n) noexcept;

// Whether crc32c() uses the instruction on this host.
bool crc32c_hardware() noexcept;

}  // namespace gatewayd::runtime
