// The traffic of bench/soak: S suppliers each sending sequenced frames to C consumers through
// the gateway (S3: 4 -> 4), every frame verified at its consumer (whole, routed right, in
// order, once). Writes live totals to a status file each second; exits non-zero on any
// corrupt, misrouted, duplicated or (for lossless consumers) missing frame.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tools/traffic/traffic_consumer.hpp"
#include "tools/traffic/traffic_supplier.hpp"

using namespace gatewayd::traffic;

namespace {

struct options {
  unsigned short supplier_port = 0;
  std::vector<unsigned short> consumer_ports;
  unsigned suppliers = 4;
  double seconds = 600;
  double rate = 20000;  // frames/s per supplier
  std::size_t payload = 256;
  std::string status_file;
};

[[noreturn]] void usage() {
  std::cerr << "usage: soak_load --supplier-port P --consumer-ports P0,P1,... [--suppliers 4]\n"
               "                 [--seconds 600] [--rate 20000] [--payload 256] [--status FILE]\n";
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage();
    const std::string v = argv[++i];
    if (a == "--supplier-port") {
      o.supplier_port = static_cast<unsigned short>(std::stoi(v));
    } else if (a == "--consumer-ports") {
      std::stringstream in(v);
      for (std::string p; std::getline(in, p, ',');)
        o.consumer_ports.push_back(static_cast<unsigned short>(std::stoi(p)));
    } else if (a == "--suppliers") {
      o.suppliers = static_cast<unsigned>(std::stoi(v));
    } else if (a == "--seconds") {
      o.seconds = std::stod(v);
    } else if (a == "--rate") {
      o.rate = std::stod(v);
    } else if (a == "--payload") {
      o.payload = static_cast<std::size_t>(std::stoul(v));
    } else if (a == "--status") {
      o.status_file = v;
    } else {
      usage();
    }
  }
  if (!o.supplier_port || o.consumer_ports.empty() || o.consumer_ports.size() > max_streams ||
      o.suppliers == 0 || o.suppliers > 0xffff)
    usage();
  return o;
}

struct totals {
  std::uint64_t sent = 0, received = 0, corrupt = 0, misrouted = 0, duplicated = 0, lost = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  const auto n_consumers = static_cast<unsigned>(o.consumer_ports.size());
  std::vector<std::unique_ptr<traffic_consumer>> consumers;
  for (unsigned k = 0; k < n_consumers; ++k)
    consumers.push_back(std::make_unique<traffic_consumer>(k, o.consumer_ports[k]));
  std::vector<std::unique_ptr<traffic_supplier>> suppliers;
  for (unsigned i = 0; i < o.suppliers; ++i)
    suppliers.push_back(std::make_unique<traffic_supplier>(
        o.supplier_port, traffic_supplier::options{.id = i,
                                                   .consumers = n_consumers,
                                                   .payload_size = o.payload,
                                                   .batch = 16,
                                                   .rate = o.rate,
                                                   .reconnect = true}));
  auto sum = [&] {
    totals t;
    for (auto& s : suppliers)
      t.sent += s->sent();
    for (auto& c : consumers) {
      const auto& y = c->tally();
      t.received += y.frames.load();
      t.corrupt += y.corrupt.load() + y.partial_at_close.load();
      t.misrouted += y.misrouted.load();
      t.duplicated += y.duplicated.load() + y.late.load();
      t.lost += y.lost.load();
    }
    return t;
  };
  auto write_status = [&](const totals& t) {
    if (o.status_file.empty()) return;
    const std::string tmp = o.status_file + ".tmp";
    {
      std::ofstream out(tmp);
      out << t.sent << ' ' << t.received << ' ' << t.corrupt << ' ' << t.misrouted << ' '
          << t.duplicated << ' ' << t.lost << '\n';
    }
    std::rename(tmp.c_str(), o.status_file.c_str());
  };

  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
         o.seconds) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    write_status(sum());
  }
  for (auto& s : suppliers)
    s->stop();
  // Lossless consumers: everything sent arrives; give the queues time to drain.
  const auto drain_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  totals t = sum();
  while (t.received < t.sent && std::chrono::steady_clock::now() < drain_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    t = sum();
  }
  write_status(t);
  std::cout << "soak_load: sent " << t.sent << " received " << t.received << " corrupt "
            << t.corrupt << " misrouted " << t.misrouted << " duplicated " << t.duplicated
            << " lost " << t.lost << '\n';
  const bool ok = t.corrupt == 0 && t.misrouted == 0 && t.duplicated == 0 && t.lost == 0 &&
                  t.received == t.sent;
  return ok ? 0 : 1;
}
