#include "gateway/ports_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace gatewayd::gateway {

std::string to_json(const bound_ports& ports) {
  // Endpoints are IP literals and digits: nothing in them needs JSON escaping. Built piecewise:
  // GCC 12 warns falsely (-Wrestrict) on a chain of string operator+.
  std::string s = "{\"pid\": ";
  s += std::to_string(ports.pid);
  s += ", \"supplier\": \"";
  s += ports.supplier.to_string();
  s += "\", \"metrics\": ";
  if (ports.metrics) {
    s += '"';
    s += ports.metrics->to_string();
    s += '"';
  } else {
    s += "null";
  }
  s += "}\n";
  return s;
}

std::error_code write_atomically(const std::filesystem::path& path, std::string_view content) {
  auto tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return {errno, std::system_category()};
  std::error_code ec;
  while (!content.empty() && !ec) {
    const ssize_t n = ::write(fd, content.data(), content.size());
    if (n > 0)
      content.remove_prefix(static_cast<std::size_t>(n));
    else if (n < 0 && errno != EINTR)
      ec = {errno, std::system_category()};
  }
  if (::close(fd) != 0 && !ec) ec = {errno, std::system_category()};
  if (!ec && ::rename(tmp.c_str(), path.c_str()) != 0) ec = {errno, std::system_category()};
  if (ec) ::unlink(tmp.c_str());
  return ec;
}

ports_file::ports_file(std::filesystem::path path, const bound_ports& ports)
    : path_(std::move(path)) {
  if (const auto ec = write_atomically(path_, to_json(ports)))
    throw std::system_error(ec, "cannot write the ports file " + path_.string());
}

ports_file::~ports_file() {
  std::error_code ignored;
  std::filesystem::remove(path_, ignored);
}

}  // namespace gatewayd::gateway
