#include "gateway/consumer_retirement.hpp"

#include <algorithm>

#include "runtime/log.hpp"

namespace gatewayd::gateway {

namespace {
// A read pass lasts microseconds; a thread descheduled in the middle of one, a little longer.
constexpr auto poll_interval = std::chrono::milliseconds(1);
}  // namespace

consumer_retirement::consumer_retirement(runtime::strand& control)
    : control_(control), poll_(control) {}

void consumer_retirement::retire(std::shared_ptr<consumers::consumer> c,
                                 std::chrono::milliseconds drain_timeout) {
  retired_.push_back(std::make_shared<retiring>(retiring{std::move(c), drain_timeout}));
}

void consumer_retirement::published(std::uint64_t version) {
  for (auto& r : retired_) {
    if (!r->version) r->version = version;
  }
  check_readers();
}

void consumer_retirement::check_readers() {
  for (auto& r : retired_) {
    if (!r->draining && r->version && readers_.all_past(r->version))
      start_drain(r, r->drain_timeout);
  }
  const bool waiting =
      std::any_of(retired_.begin(), retired_.end(), [](const auto& r) { return !r->draining; });
  if (!waiting || polling_) return;
  polling_ = true;
  poll_.expires_after(poll_interval);
  poll_.async_wait([this](std::error_code ec) {
    polling_ = false;
    if (!ec) check_readers();
  });
}

void consumer_retirement::start_drain(const std::shared_ptr<retiring>& r,
                                      std::chrono::milliseconds timeout) {
  r->draining = true;
  GW_LOG(info) << "consumer " << r->consumer->name()
               << (r->consumer->member().empty() ? "" : " member " + r->consumer->member())
               << " removed; draining for up to " << timeout.count() << " ms";
  r->consumer->drain_and_close(timeout, consumers::drop_reason::removed,
                               [control = control_, weak = std::weak_ptr<retiring>(r),
                                name = r->consumer->name()](std::uint64_t left) {
                                 GW_LOG(info) << "consumer " << name << " closed after removal, "
                                              << left << " frames undelivered";
                                 asio::post(control, [weak] {
                                   if (auto p = weak.lock()) p->closed = true;
                                 });
                               });
}

std::vector<std::shared_ptr<consumers::consumer>> consumer_retirement::to_export(
    const std::vector<std::shared_ptr<consumers::consumer>>& live) {
  std::vector<std::shared_ptr<consumers::consumer>> out;
  for (const auto& r : retired_) {
    // (A group's members share its name: a removed member is told apart by its endpoint.)
    const bool reused = std::any_of(live.begin(), live.end(), [&](const auto& c) {
      return c->name() == r->consumer->name() && c->member() == r->consumer->member();
    });
    if (!reused) out.push_back(r->consumer);
  }
  // Exported one last time by this table: closed ones are forgotten.
  std::erase_if(retired_, [](const auto& r) { return r->closed; });
  return out;
}

void consumer_retirement::stop(bool cut_short) {
  poll_.cancel();
  for (auto& r : retired_) {
    if (r->closed) continue;
    if (!r->draining) {
      start_drain(r, cut_short ? std::chrono::milliseconds(0) : r->drain_timeout);
    } else if (cut_short) {
      r->consumer->drain_and_close(std::chrono::milliseconds(0), consumers::drop_reason::removed,
                                   nullptr);
    }
  }
}

}  // namespace gatewayd::gateway
