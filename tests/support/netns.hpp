// Network namespaces for the network-fault tests: a peer "host" of its own joined to the test's
// namespace by a veth pair, the kernel's nftables inside it to drop packets (a partition, one
// direction, a random share) and to heal, and processes or sockets started in it.
#pragma once

#include <sys/types.h>

#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/daemon_process.hpp"

namespace gatewayd::test {

// Empty when this process can make namespaces, veth pairs and nftables rules (root, or
// CAP_SYS_ADMIN and CAP_NET_ADMIN, with `ip` and `nft` installed); otherwise why not, in one
// line: the tests are then skipped with it, never silently passed.
const std::string& netns_unavailable();
// A Boost.Test precondition that skips a suite where netns_unavailable() says why. Boost.Test
// prints the reason only at --log_level=test_suite, so it also prints one line whatever the
// level, "SKIPPED: ...", which ctest reads as a skip (SKIP_REGULAR_EXPRESSION in
// tests/faults/CMakeLists.txt).
boost::test_tools::assertion_result namespaces_available(boost::unit_test::test_unit_id);

// One namespace `gwf-PID-N` with a veth pair to the test's namespace: a /30 of 10.0.0.0/8 picked
// from the PID and N (`outer_address()` on our side, `address()` inside), so parallel ctest runs
// never share a name or an address (one that a route of this host already covers is refused,
// failing the test with the route, rather than shadowed). At most four per process. The destructor
// (also when a test fails) kills the processes it started, by PID, and deletes the namespace (and
// so the pair). The first one a process makes deletes the namespaces of earlier test processes that
// died without cleaning up (`gwf-PID-*` whose PID is gone).
class netns_host {
 public:
  netns_host();
  ~netns_host();
  netns_host(const netns_host&) = delete;
  netns_host& operator=(const netns_host&) = delete;

  const std::string& name() const noexcept { return name_; }
  const std::string& address() const noexcept { return inner_addr_; }
  const std::string& outer_address() const noexcept { return outer_addr_; }

  // Runs `f` on a thread that joined this namespace and waits for it: the sockets `f` opens
  // (a listener, say) live in the namespace whichever thread uses them afterwards.
  void run(const std::function<void()>& f) const;
  // Starts `binary args...` inside the namespace (`ip netns exec`, which execs it: the PID is
  // the program's), logging to `log`; owned here, killed before the namespace goes.
  daemon_process& start(const std::string& binary, const std::vector<std::string>& args,
                        const std::filesystem::path& log);

  // Faults, each replacing the one before; `port` 0 = every port. Input and output are this
  // host's: drop_input() loses what the peer sends it, drop_output() what it sends back.
  void partition();
  void drop_input(unsigned short port = 0);
  void drop_output(unsigned short port = 0);
  // Connection attempts to `port` (SYNs) vanish: a host that is down at dial time.
  void drop_syn(unsigned short port);
  // Every packet to and from the peer's `remote_ports` (a gateway's listeners), both ways: this
  // host is cut off from that one service, the rest still flows.
  void partition_from(const std::vector<unsigned short>& remote_ports);
  // `percent` of the packets each way, at random.
  void drop_random(int percent);
  void heal();

 private:
  void apply(const std::string& input_rules, const std::string& output_rules);

  int index_ = 0;
  std::string name_, outer_if_, inner_if_, outer_addr_, inner_addr_;
  temp_dir dir_;
  std::vector<std::unique_ptr<daemon_process>> processes_;
};

}  // namespace gatewayd::test
