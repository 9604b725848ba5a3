#include "tests/support/scrape.hpp"

#include "tests/support/exposition.hpp"
#include "tests/support/http_get.hpp"

namespace gatewayd::test {

double scrape_metric(unsigned short port, const std::string& series) {
  const auto reply = http_get(port, "/metrics");
  if (reply.status != 200) return -1;
  return sample_value(reply.body, series).value_or(-1);
}

}  // namespace gatewayd::test
