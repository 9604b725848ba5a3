// The one main() of every Boost.Test suite: names the master suite after the executable.
//
// A suite used to define BOOST_TEST_MODULE before its first include, which made Boost.Test
// generate main() in that file. That define must come before <boost/test/unit_test.hpp>, so no
// suite could start with a precompiled header holding it (tests/support/precompiled.hpp); with
// main() here, every suite does.
#include <boost/test/unit_test.hpp>
#include <string>

namespace {

bool name_the_master_suite() {
  auto& master = boost::unit_test::framework::master_test_suite();
  std::string name = master.argc > 0 ? master.argv[0] : "gatewayd";
  name = name.substr(name.find_last_of('/') + 1);
  if (name.ends_with("_test")) name.resize(name.size() - 5);
  master.p_name.value = name;
  return true;
}

}  // namespace

int main(int argc, char* argv[]) {
  return boost::unit_test::unit_test_main(&name_the_master_suite, argc, argv);
}
