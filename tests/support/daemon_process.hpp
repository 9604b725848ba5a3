// Runs the real gatewayd binary as a child process for end-to-end tests: its stderr goes
// to a log file the test can wait on, and it is ended by the PID we started, never by name.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace gatewayd::test {

// A fresh directory under /tmp, removed with everything in it when this goes out of scope.
class temp_dir {
 public:
  temp_dir();
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::filesystem::path& path() const noexcept { return path_; }
  std::filesystem::path write(const std::string& name, const std::string& content) const;

 private:
  std::filesystem::path path_;
};

class daemon_process {
 public:
  // Starts `binary args...`; extra environment entries as "NAME=value".
  daemon_process(const std::string& binary, const std::vector<std::string>& args,
                 const std::filesystem::path& log_file,
                 const std::vector<std::string>& extra_env = {});
  ~daemon_process();  // SIGKILL + reap if still running
  daemon_process(const daemon_process&) = delete;
  daemon_process& operator=(const daemon_process&) = delete;

  pid_t pid() const noexcept { return pid_; }
  void signal(int signo) const;
  // The exit status (or 128+signal) once the process ended within `timeout`.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout);
  bool running();

  std::string log() const;
  // Waits until the log contains `text`; returns the first log line containing it.
  std::optional<std::string> wait_for_log(const std::string& text,
                                          std::chrono::milliseconds timeout) const;
  // Counts the log lines containing `text`.
  std::size_t count_in_log(const std::string& text) const;

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::filesystem::path log_file_;
};

// Runs `binary args...` to completion (bounded), capturing stdout and stderr.
struct command_result {
  int exit_code = -1;
  std::string out;
  std::string err;
};
command_result run_command(const std::string& binary, const std::vector<std::string>& args,
                           std::chrono::milliseconds timeout = std::chrono::seconds(20));

// The port in a log line "... on 127.0.0.1:PORT ...", or 0.
unsigned short port_in(const std::string& line);

}  // namespace gatewayd::test
