#include "tools/gateway_peer/top.hpp"

#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <iostream>
#include <thread>

#include "tools/gateway_peer/http_fetch.hpp"
#include "tools/gateway_peer/stop_signal.hpp"
#include "tools/gateway_peer/top_view.hpp"

namespace gatewayd::tools {
namespace {

using clock = std::chrono::steady_clock;

std::atomic<bool>& resized() noexcept {
  static std::atomic<bool> flag{false};
  return flag;
}

void write_all(const std::string& s) {
  for (std::size_t at = 0; at < s.size();) {
    const ssize_t n = ::write(STDOUT_FILENO, s.data() + at, s.size() - at);
    if (n > 0) {
      at += static_cast<std::size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      return;  // the terminal is gone
    }
  }
}

// The terminal while top runs: keys arrive one by one without echo, the view is drawn on the
// alternate screen with the cursor hidden. The destructor puts everything back, whichever way
// top ends (q, Ctrl-C, SIGTERM, an exception).
class terminal_screen {
 public:
  terminal_screen() {
    if (::tcgetattr(STDIN_FILENO, &saved_) == 0) {
      termios raw = saved_;
      raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
      // Ctrl-C stays a signal (ISIG), handled like SIGTERM; Ctrl-Z would stop top with the
      // terminal still raw, so it is off while top runs.
      raw.c_cc[VSUSP] = _POSIX_VDISABLE;
      raw.c_cc[VMIN] = 0;
      raw.c_cc[VTIME] = 0;
      have_saved_ = ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) == 0;
    }
    write_all("\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J");  // alternate screen, cursor hidden
  }
  ~terminal_screen() {
    write_all("\x1b[?25h\x1b[?1049l");  // cursor shown, back to the normal screen
    if (have_saved_) ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_);
  }
  terminal_screen(const terminal_screen&) = delete;
  terminal_screen& operator=(const terminal_screen&) = delete;

  static std::pair<std::size_t, std::size_t> size() {
    winsize w{};
    if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 0 && w.ws_row > 0)
      return {w.ws_col, w.ws_row};
    return {80, 24};
  }

  // Each line over the last frame's, cleared to its end; then the rest of the screen cleared.
  static void draw(const std::vector<std::string>& lines) {
    std::string out = "\x1b[H";
    for (std::size_t i = 0; i < lines.size(); ++i) {
      out += lines[i];
      out += "\x1b[K";
      if (i + 1 < lines.size()) out += "\r\n";
    }
    out += "\x1b[J";
    write_all(out);
  }

 private:
  termios saved_{};
  bool have_saved_ = false;
};

gateway_reading look(const net::endpoint& at, std::chrono::milliseconds timeout) {
  gateway_reading r;
  r.at = clock::now();
  const http_reply metrics = http_fetch(at, "/metrics", timeout);
  const http_reply connz = metrics.status == 200 ? http_fetch(at, "/connz", timeout) : http_reply{};
  const http_reply routez = connz.status == 200 ? http_fetch(at, "/routez", timeout) : http_reply{};
  using answer = std::pair<const http_reply*, const char*>;
  for (const auto& [reply, path] :
       {answer{&metrics, "/metrics"}, answer{&connz, "/connz"}, answer{&routez, "/routez"}}) {
    if (reply->status == 200) continue;
    r.error = std::string(path) + ": " +
              (reply->status ? "HTTP " + std::to_string(reply->status) : reply->error);
    return r;
  }
  try {
    read_bodies(r, metrics.body, connz.body, routez.body);
  } catch (const std::exception& e) {
    r = gateway_reading{};
    r.error = std::string("unexpected answer: ") + e.what();
  }
  return r;
}

}  // namespace

int run_top(const top_options& o) {
  install_stop_handlers();
  const auto interval =
      std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(o.interval));
  const auto timeout = std::chrono::milliseconds(2000);
  const std::string target = o.metrics.to_string();
  top_view view;

  if (o.once) {
    // Two looks one interval apart, so the rates have something to go on.
    view.update(look(o.metrics, timeout));
    std::this_thread::sleep_for(interval);
    auto second = look(o.metrics, timeout);
    const bool failed = !second.error.empty();
    view.update(std::move(second));
    for (const auto& line : view.render(1000, 0, target))
      std::cout << line << '\n';
    return failed ? exit_runtime_error : exit_ok;
  }
  if (!::isatty(STDOUT_FILENO)) {
    std::cerr << "gateway-peer top: the output is not a terminal (--once prints one look)\n";
    return exit_usage;
  }

  struct sigaction sa {};
  sa.sa_handler = [](int) { resized().store(true); };
  sigemptyset(&sa.sa_mask);
  sigaction(SIGWINCH, &sa, nullptr);  // no SA_RESTART: poll() returns to redraw

  terminal_screen screen;
  const bool keys = ::isatty(STDIN_FILENO);
  auto next_look = clock::now();
  while (!stop_requested().load() && !view.quit()) {
    bool redraw = resized().exchange(false);
    if (clock::now() >= next_look) {
      view.update(look(o.metrics, timeout));
      next_look = clock::now() + interval;
      redraw = true;
    }
    if (redraw) {
      const auto [width, height] = terminal_screen::size();
      terminal_screen::draw(view.render(width, height, target));
    }
    const auto wait =
        std::chrono::duration_cast<std::chrono::milliseconds>(next_look - clock::now());
    pollfd p{keys ? STDIN_FILENO : -1, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(0, wait.count())));
    if (n > 0 && (p.revents & POLLIN)) {
      char buf[64];
      const ssize_t got = ::read(STDIN_FILENO, buf, sizeof buf);
      bool changed = false;
      for (ssize_t i = 0; i < got; ++i)
        changed |= view.handle_key(buf[i]);
      if (changed && !view.quit()) {
        const auto [width, height] = terminal_screen::size();
        terminal_screen::draw(view.render(width, height, target));
      }
    } else if (n > 0 && (p.revents & (POLLHUP | POLLERR))) {
      break;  // the terminal went away
    }
  }
  return exit_ok;
}

}  // namespace gatewayd::tools
