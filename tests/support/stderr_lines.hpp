// What this process writes to stderr while one of these lives: the log lines of the classes a
// unit test runs in-process (runtime/log writes each line to fd 2), to wait on or count the way
// daemon_process reads a daemon's log. Not for two at once.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

namespace gatewayd::test {

class stderr_lines {
 public:
  stderr_lines() : file_(std::tmpfile()), saved_(::dup(STDERR_FILENO)) {
    if (file_ && saved_ >= 0) ::dup2(::fileno(file_), STDERR_FILENO);
  }
  ~stderr_lines() {
    if (saved_ >= 0) {
      ::dup2(saved_, STDERR_FILENO);
      ::close(saved_);
    }
    if (file_) std::fclose(file_);
  }
  stderr_lines(const stderr_lines&) = delete;
  stderr_lines& operator=(const stderr_lines&) = delete;

  // Everything written so far.
  std::string text() const {
    std::ifstream in("/proc/self/fd/" + std::to_string(::fileno(file_)));
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  std::size_t count(std::string_view needle) const {
    const std::string all = text();
    std::size_t n = 0;
    for (auto at = all.find(needle); at != std::string::npos; at = all.find(needle, at + 1))
      ++n;
    return n;
  }

 private:
  std::FILE* file_;
  int saved_;
};

}  // namespace gatewayd::test
