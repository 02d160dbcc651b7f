#pragma once
// Range checks of values handed to an operation or taken from the command line: each failure is
// an InputError naming the field or flag, the value and what is allowed (exit 2 at the top).
// Header-only, no Boost, no CUDA: the kernels' dispatchers use them too.

#include "core/ops/errors.hpp"

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace moefin::ranges {

template <class T> std::string to_text(T const& v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

/// Throws InputError "NAME: value V out of range [lo, hi]" unless lo <= value <= hi.
template <class T> void check_range(std::string const& name, T value, T lo, T hi) {
  if (!(value >= lo && value <= hi))
    throw InputError(name + ": value " + to_text(value) + " out of range [" + to_text(lo) + ", " +
                     to_text(hi) + "]");
}

/// Throws InputError unless value is a positive multiple of m.
inline void check_multiple(std::string const& name, std::int64_t value, std::int64_t m) {
  if (value <= 0 || value % m != 0)
    throw InputError(name + ": value " + std::to_string(value) +
                     " must be a positive multiple of " + std::to_string(m));
}

/// Throws InputError listing `allowed` unless value is one of them.
inline void check_choice(std::string const& name, std::string const& value,
                         std::vector<std::string> const& allowed) {
  for (auto const& a : allowed)
    if (a == value)
      return;
  std::string list;
  for (auto const& a : allowed)
    list += (list.empty() ? "" : ", ") + a;
  throw InputError(name + ": value '" + value + "' not one of {" + list + "}");
}

} // namespace moefin::ranges
