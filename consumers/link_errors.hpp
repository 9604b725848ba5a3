// How the consumer link names a socket error: its errno, why a connection ended or a dial failed.
#pragma once

#include <asio.hpp>
#include <system_error>

#include "consumers/consumer_stats.hpp"

namespace gatewayd::consumers {

// The errno behind `ec`, or 0. The drain's own writes report std::system_category(), Asio's
// operations its "asio.system" category: an Asio enum compares equal to only one of the two.
int errno_of(std::error_code ec);
disconnect_reason disconnect_reason_of(std::error_code ec);
connect_failure connect_failure_of(std::error_code ec);
// Only a connection that failed loses what its peer had not acknowledged; one the gateway
// closes itself still delivers its send buffer after close().
bool loses_unacknowledged(disconnect_reason r);

}  // namespace gatewayd::consumers
