// One problem found in a configuration file, positioned so an editor can jump to it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gatewayd::config {

struct config_error {
  std::string file;
  std::uint32_t line = 0;    // 1-based; 0 when the problem concerns the whole file
  std::uint32_t column = 0;  // 1-based; 0 when unknown
  std::string message;

  // "file:line:col: message", the form compilers use, so editors and CI annotate it.
  std::string to_string() const;
};

// Orders errors of each file by position, keeping the order of the files themselves: an
// operator reads them top to bottom, whatever order the checks ran in.
void sort_by_position(std::vector<config_error>& errors);

}  // namespace gatewayd::config
