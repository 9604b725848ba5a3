#include "tests/support/daemon_process.hpp"
#include "tests/support/wait_until.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace gatewayd::test {

temp_dir::temp_dir() {
  std::random_device rd;
  for (int i = 0; i < 100; ++i) {
    auto p = std::filesystem::temp_directory_path() /
             ("gatewayd-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    if (std::filesystem::create_directory(p)) {
      path_ = p;
      return;
    }
  }
  throw std::runtime_error("cannot create a temporary directory");
}

temp_dir::~temp_dir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::filesystem::path temp_dir::write(const std::string& name, const std::string& content) const {
  const auto p = path_ / name;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc) << content;
  return p;
}

namespace {

std::vector<char*> argv_of(const std::string& binary, const std::vector<std::string>& args,
                           std::vector<std::string>& storage) {
  storage.clear();
  storage.push_back(binary);
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : storage)
    argv.push_back(s.data());
  argv.push_back(nullptr);
  return argv;
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

daemon_process::daemon_process(const std::string& binary, const std::vector<std::string>& args,
                               const std::filesystem::path& log_file,
                               const std::vector<std::string>& extra_env)
    : log_file_(log_file) {
  std::vector<std::string> storage;
  auto argv = argv_of(binary, args, storage);
  std::vector<std::string> env_storage;
  for (char** e = environ; *e; ++e) {
    const std::string entry(*e);
    // The daemon must not think it runs under systemd unless a test says so.
    if (entry.rfind("NOTIFY_SOCKET=", 0) == 0 || entry.rfind("JOURNAL_STREAM=", 0) == 0 ||
        entry.rfind("WATCHDOG_", 0) == 0)
      continue;
    if (entry.rfind("ASAN_OPTIONS=", 0) == 0) continue;  // set below, with the quarantine cap
    env_storage.push_back(entry);
  }
  // ASan keeps freed memory in a quarantine of up to 256 MB, which the daemon's RSS shows: a
  // test that counts the daemon's memory after many short-lived allocations (OpenSSL's key
  // updates, say) would measure the quarantine. 16 MB still catches a use after free in a test.
  const char* asan = std::getenv("ASAN_OPTIONS");
  env_storage.push_back(std::string("ASAN_OPTIONS=") + (asan && *asan ? asan : "") +
                        (asan && *asan ? ":" : "") + "quarantine_size_mb=16");
  env_storage.insert(env_storage.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp;
  for (auto& s : env_storage)
    envp.push_back(s.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_file.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log_file.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  const int rc = posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + binary);
}

daemon_process::~daemon_process() {
  if (running()) {
    ::kill(pid_, SIGKILL);
    wait_exit(std::chrono::seconds(5));
  }
}

void daemon_process::signal(int signo) const {
  ::kill(pid_, signo);
}

bool daemon_process::running() {
  if (status_) return false;
  int st = 0;
  const pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return false;
  }
  return r == 0;
}

std::optional<int> daemon_process::wait_exit(std::chrono::milliseconds timeout) {
  if (!wait_until([&] { return !running(); }, timeout, std::chrono::milliseconds(10)))
    return std::nullopt;
  return status_;
}

std::string daemon_process::log() const {
  return slurp(log_file_);
}

std::optional<std::string> daemon_process::wait_for_log(const std::string& text,
                                                        std::chrono::milliseconds timeout) const {
  std::optional<std::string> found;
  wait_until(
      [&] {
        std::istringstream lines(log());
        for (std::string line; std::getline(lines, line);) {
          if (line.find(text) != std::string::npos) {
            found = line;
            return true;
          }
        }
        return false;
      },
      timeout, std::chrono::milliseconds(20));
  return found;
}

std::size_t daemon_process::count_in_log(const std::string& text) const {
  std::istringstream lines(log());
  std::size_t n = 0;
  for (std::string line; std::getline(lines, line);)
    n += line.find(text) != std::string::npos;
  return n;
}

command_result run_command(const std::string& binary, const std::vector<std::string>& args,
                           std::chrono::milliseconds timeout) {
  temp_dir dir;
  const auto out_file = dir.path() / "out";
  const auto err_file = dir.path() / "err";
  std::vector<std::string> storage;
  auto argv = argv_of(binary, args, storage);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_file.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_file.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + binary);
  command_result r;
  int st = 0;
  if (!wait_until([&] { return ::waitpid(pid, &st, WNOHANG) == pid; }, timeout,
                  std::chrono::milliseconds(5))) {
    ::kill(pid, SIGKILL);  // ours, by its PID
    ::waitpid(pid, &st, 0);
  }
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = slurp(out_file);
  r.err = slurp(err_file);
  return r;
}

unsigned short port_in(const std::string& line) {
  static const std::regex re(R"(127\.0\.0\.1:(\d+))");
  std::smatch m;
  if (!std::regex_search(line, m, re)) return 0;
  return static_cast<unsigned short>(std::stoi(m[1]));
}

}  // namespace gatewayd::test
