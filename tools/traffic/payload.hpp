// Whole traffic payloads: the header followed by printable filler, built once and stamped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tools/traffic/payload_header.hpp"

namespace gatewayd::traffic {

// Fills bytes [header_size, size) of `payload` with the filler text (what `recv --print`
// shows); the header bytes are left alone.
void fill_payload(char* payload, std::size_t size) noexcept;

// A payload of max(size, header_size) bytes numbered `sequence` of (sender, stream), with a
// zero send time: a frame whose origin and order a test reads back with read_header().
std::string numbered_payload(std::uint16_t sender, std::uint64_t sequence, std::size_t size = 32,
                             std::uint8_t stream = 0);

}  // namespace gatewayd::traffic
