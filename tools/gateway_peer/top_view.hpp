// `gateway-peer top`'s screen as data: one reading of the gateway's /metrics, /connz and /routez,
// the rates between two readings, the order the operator picked, and the lines to draw. No
// sockets and no terminal here, so the screen can be checked from its inputs alone.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace gatewayd::tools {

// The samples of one Prometheus text exposition, each as its name, label text and value.
class exposition {
 public:
  static exposition parse(std::string_view text);
  // The sum of the samples of `name` whose label text contains each of `filters` (such as
  // `reason="reclaimed"`); 0 when there are none.
  double sum(std::string_view name, std::initializer_list<std::string_view> filters = {}) const;
  // The value of label `label` on the first sample of `name`, or "".
  std::string label(std::string_view name, std::string_view label) const;
  // The values `label` takes on the samples of `name`, in the order they came.
  std::vector<std::string> label_values(std::string_view name, std::string_view label) const;

 private:
  struct sample {
    std::string name, labels;
    double value;
  };
  std::vector<sample> samples_;
};

struct consumer_row {
  std::string name, state, overflow;  // state: connected, congested or disconnected
  std::uint64_t depth = 0, capacity = 0, queued_bytes = 0;
  std::uint64_t sent = 0, sent_bytes = 0, dropped = 0;  // dropped: every reason
  bool ack = false;
  std::uint64_t unacked = 0, unacked_bytes = 0, redelivered = 0, reconnects = 0;
  double sent_rate = -1, bytes_rate = -1, drop_rate = -1;  // per second; -1 until two readings
};

struct supplier_row {
  std::string peer, state, tls;  // state: reading, paused or confirming (CONFIRM frames owed)
  double age_seconds = 0;        // since the connection was accepted
  std::uint64_t frames = 0, pending = 0, confirmed = 0;
  double rate = -1;  // frames per second; -1 until two readings
};

// What one look at the gateway found.
struct gateway_reading {
  std::chrono::steady_clock::time_point at{};
  std::string error;  // not empty: the look failed, and says why
  exposition metrics;
  std::vector<consumer_row> consumers;
  std::vector<supplier_row> suppliers;  // as /connz lists them (oldest first, up to its limit)
  std::uint64_t suppliers_total = 0;
  std::uint64_t table_version = 0, routes = 0;
  std::string sha256;
};

// Fills `r` from the three bodies; throws std::exception with the reason when one is malformed.
void read_bodies(gateway_reading& r, std::string_view metrics, std::string_view connz,
                 std::string_view routez);

enum class sort_key { name, fill, rate, drops, unacked };

class top_view {
 public:
  // The next reading: rates are its counters' growth since the last good one.
  void update(gateway_reading reading);
  // A key the operator pressed: q quits; s picks the next sort column, r reverses it, and
  // n, f, t, d, u sort by name, fill, rate, drops, unacked. False when it meant nothing.
  bool handle_key(char key);
  bool quit() const noexcept { return quit_; }
  sort_key sorted_by() const noexcept { return key_; }
  // The screen: at most `height` lines of at most `width` characters; the last one names the
  // keys. Height 0: every line, no key line (a one-off print). `target`: the HOST:PORT watched.
  std::vector<std::string> render(std::size_t width, std::size_t height,
                                  std::string_view target) const;

 private:
  gateway_reading now_, last_;
  bool have_now_ = false, have_last_ = false;
  std::string error_;  // the last look's failure, shown above the last good reading
  double dt_ = 0;      // seconds between last_ and now_
  sort_key key_ = sort_key::name;
  bool reverse_ = false;
  bool quit_ = false;
};

}  // namespace gatewayd::tools
