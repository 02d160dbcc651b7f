#pragma once
// Runtime values -> compile-time template parameters, for dispatchers only (the role of
// FlashAttention's static_switch.h, written with generic lambdas instead of macros):
//
//   bool_switch(split, [&](auto kSplit) { launch<decltype(kSplit)::value>(...); });
//
// The callable receives a std::integral_constant; every branch is instantiated, so keep the
// value sets small.

#include "core/ops/errors.hpp"

#include <string>
#include <type_traits>

namespace moefin {

template <class F> decltype(auto) bool_switch(bool value, F&& f) {
  if (value)
    return f(std::true_type{});
  return f(std::false_type{});
}

/// Calls f(std::integral_constant<T, V>) for the V of `values` equal to `value`; throws
/// InputError naming `what` when none is.
template <class T, T... kValues, class F> void value_switch(T value, char const* what, F&& f) {
  bool const found =
      ((value == kValues ? (f(std::integral_constant<T, kValues>{}), true) : false) || ...);
  if (!found)
    throw InputError(std::string(what) + ": value " +
                     std::to_string(static_cast<long long>(value)) + " has no compiled kernel");
}

} // namespace moefin
