#include "config/config_error.hpp"

#include <algorithm>
#include <tuple>

namespace gatewayd::config {

std::string config_error::to_string() const {
  std::string out = file;
  if (line != 0) {
    out += ':';
    out += std::to_string(line);
    if (column != 0) {
      out += ':';
      out += std::to_string(column);
    }
  }
  out += ": ";
  out += message;
  return out;
}

void sort_by_position(std::vector<config_error>& errors) {
  auto file_begin = errors.begin();
  while (file_begin != errors.end()) {
    // Errors arrive grouped by file; sort each group in place.
    auto file_end = std::find_if(file_begin, errors.end(),
                                 [&](const config_error& e) { return e.file != file_begin->file; });
    std::stable_sort(file_begin, file_end, [](const config_error& a, const config_error& b) {
      return std::tie(a.line, a.column) < std::tie(b.line, b.column);
    });
    file_begin = file_end;
  }
}

}  // namespace gatewayd::config
