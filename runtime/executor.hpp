// The executor every gateway handler runs through: the io_context's own, wrapped so that the
// first act of each function it runs is the Leader/Followers promotion.
#pragma once

#include <asio.hpp>
#include <type_traits>
#include <utility>

#include "runtime/lf_pool.hpp"

namespace gatewayd::runtime {

// Components below gateway/ never see the io_context: they are given a runtime::executor and
// build their strands, sockets and timers from it. Every completion handler, post and dispatch
// therefore reaches a pool thread through execute() below, so the Leader/Followers promotion
// happens in exactly one place and no handler can run without it (lf_pool_test proves it per
// handler kind). On a thread outside a pool the hook is a no-op.
//
// A strand over this executor runs its queue in one invoker; the invoker is what passes through
// execute(), so the promotion happens once per strand turn, before its first handler, on the
// thread that took the event. Properties (blocking, work tracking, relationship, allocator)
// are forwarded to the wrapped executor and keep the wrapper around the result.
template <class Inner>
class basic_promoting_executor {
 public:
  explicit basic_promoting_executor(const Inner& inner) noexcept : inner_(inner) {}

  template <class F>
  void execute(F&& f) const {
    asio::execution::execute(inner_, promote_then<std::decay_t<F>>{std::forward<F>(f)});
  }

  template <class Property>
  auto query(const Property& p) const
      noexcept(noexcept(asio::query(std::declval<const Inner&>(), p)))
          -> decltype(asio::query(std::declval<const Inner&>(), p)) {
    return asio::query(inner_, p);
  }

  template <class Property>
  auto require(const Property& p) const -> basic_promoting_executor<
      std::decay_t<decltype(asio::require(std::declval<const Inner&>(), p))>> {
    return basic_promoting_executor<std::decay_t<decltype(asio::require(inner_, p))>>(
        asio::require(inner_, p));
  }

  template <class Property>
  auto prefer(const Property& p) const -> basic_promoting_executor<
      std::decay_t<decltype(asio::prefer(std::declval<const Inner&>(), p))>> {
    return basic_promoting_executor<std::decay_t<decltype(asio::prefer(inner_, p))>>(
        asio::prefer(inner_, p));
  }

  const Inner& inner() const noexcept { return inner_; }

  friend bool operator==(const basic_promoting_executor& a,
                         const basic_promoting_executor& b) noexcept {
    return a.inner_ == b.inner_;
  }
  friend bool operator!=(const basic_promoting_executor& a,
                         const basic_promoting_executor& b) noexcept {
    return !(a == b);
  }

 private:
  template <class F>
  struct promote_then {
    F f;
    void operator()() {
      lf_pool::promote_new_leader();
      f();
    }
  };

  Inner inner_;
};

using executor = basic_promoting_executor<asio::io_context::executor_type>;
using strand = asio::strand<executor>;

inline executor make_executor(asio::io_context& ioc) noexcept {
  return executor(ioc.get_executor());
}
inline strand make_strand(const executor& ex) {
  return asio::make_strand(ex);
}

}  // namespace gatewayd::runtime
