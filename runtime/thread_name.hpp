// Names the calling thread, so `top -H`, `perf` and /proc/PID/task show which part of the
// gateway spends the CPU (a Leader/Followers thread, the spool thread) instead of "gatewayd" N
// times.
#pragma once

#include <pthread.h>

#include <cstdio>

namespace gatewayd::runtime {

// The kernel keeps 15 characters: longer names are cut, never refused.
inline void name_this_thread(const char* name) noexcept {
  char cut[16];
  std::snprintf(cut, sizeof cut, "%s", name);
  pthread_setname_np(pthread_self(), cut);
}

}  // namespace gatewayd::runtime
