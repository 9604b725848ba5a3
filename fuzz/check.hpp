// The one assertion of the fuzz targets: a broken property aborts, which libFuzzer reports as
// a crash with the input that caused it (assert() would vanish under NDEBUG).
#pragma once

#include <cstdlib>

namespace gatewayd::fuzz {

inline void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace gatewayd::fuzz
