#include "consumers/link_errors.hpp"

#include <cerrno>

namespace gatewayd::consumers {

int errno_of(std::error_code ec) {
  if (ec.category() == std::system_category() ||
      ec.category() == asio::error::get_system_category())
    return ec.value();
  return 0;
}

disconnect_reason disconnect_reason_of(std::error_code ec) {
  if (ec == asio::error::eof) return disconnect_reason::peer_closed;
  switch (errno_of(ec)) {
    case ECONNRESET:
    case EPIPE:
    case ECONNABORTED:
      return disconnect_reason::reset;
    case ETIMEDOUT:
      return disconnect_reason::timed_out;
    default:
      return disconnect_reason::error;
  }
}

connect_failure connect_failure_of(std::error_code ec) {
  switch (errno_of(ec)) {
    case ECONNREFUSED:
      return connect_failure::refused;
    case ETIMEDOUT:
      return connect_failure::timed_out;
    case EHOSTUNREACH:
    case ENETUNREACH:
      return connect_failure::unreachable;
    default:
      return connect_failure::error;
  }
}

bool loses_unacknowledged(disconnect_reason r) {
  return r == disconnect_reason::peer_closed || r == disconnect_reason::reset ||
         r == disconnect_reason::timed_out || r == disconnect_reason::error;
}

}  // namespace gatewayd::consumers
