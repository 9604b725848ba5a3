// Unlinks spool files on a thread of its own, so the spool thread never waits for the kernel to
// free a consumed segment (15-20 ms for 64 MiB in the page cache, during which it would answer
// no consumer's read).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <mutex>
#include <thread>

namespace gatewayd::consumers {

// Takes files no one will open again (renamed out of every reader's way first: a name it holds
// is never given to a new file), unlinks them in the order given. A file it has not reached when
// the process dies is left on disk: segment_log::open() removes it (segment_log.hpp).
class file_reaper {
 public:
  file_reaper();
  // Unlinks what was handed to it, then joins.
  ~file_reaper();
  file_reaper(const file_reaper&) = delete;
  file_reaper& operator=(const file_reaper&) = delete;

  void remove(std::filesystem::path path);
  // Returns once every file handed over before the call is unlinked (or failed to be).
  void wait_idle();
  // Files it failed to unlink (ENOENT aside: gone already), all time.
  std::uint64_t errors() const;

 private:
  void run();

  mutable std::mutex mutex_;
  std::condition_variable wake_;  // work, or stopping
  std::condition_variable idle_;  // the queue is empty and nothing is being unlinked
  std::deque<std::filesystem::path> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::uint64_t errors_ = 0;
  std::thread thread_;  // last: started once the members above are
};

}  // namespace gatewayd::consumers
