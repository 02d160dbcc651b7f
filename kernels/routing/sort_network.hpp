#pragma once
// A compile-time sorting network (Batcher's odd-even merge sort) over a register array, for the
// decode routing's per-lane key lists. Host-visible (no CUDA includes): tests/test_routing.cpp
// runs the same network on the host.
//
// For n a power of two the network has (log2 n)(log2 n - 1) n / 4 + n - 1 compare-exchanges
// (19 at n = 8, 63 at 16, 191 at 32), every index a constant once the loops are unrolled, so the
// array stays in registers: one max and one min per compare-exchange.

#include <cstdint>
#include <type_traits>
#include <utility>

#if defined(__CUDACC__)
#define MOEFIN_SORT_HD __host__ __device__ __forceinline__
#else
#define MOEFIN_SORT_HD inline
#endif

namespace moefin::routing::net {

/// Visits the compare-exchanges (a, b), a < b, of the network on kN elements in an order that
/// sorts: merges of sorted runs of length p = 1, 2, 4, ..., each in the odd-even steps of
/// distance k = p, p/2, ..., 1, where only pairs inside one run of length 2p take part.
template <int kN, typename F>
constexpr void visit_exchanges(F&& f) {
  for (int p = 1; p < kN; p <<= 1)
    for (int k = p; k >= 1; k >>= 1)
      for (int j = k % p; j + k < kN; j += 2 * k)
        for (int i = 0; i < k; ++i)
          if (i + j + k < kN && (i + j) / (2 * p) == (i + j + k) / (2 * p))
            f(i + j, i + j + k);
}

/// Compare-exchanges of the network on kN elements.
template <int kN>
constexpr int exchanges() {
  int n = 0;
  visit_exchanges<kN>([&](int, int) { ++n; });
  return n;
}

/// The network as a table, built at compile time, so that the sort below is one flat sequence
/// of exchanges with constant indices (nested loops of 191 exchanges at n = 32 are not unrolled
/// by nvcc, and an array indexed at run time leaves the registers for local memory).
template <int kN>
struct Network {
  struct Table {
    int a[exchanges<kN>() + 1];
    int b[exchanges<kN>() + 1];
  };
  static constexpr Table make() {
    Table t{};
    int n = 0;
    visit_exchanges<kN>([&](int a, int b) {
      t.a[n] = a;
      t.b[n] = b;
      ++n;
    });
    return t;
  }
  static constexpr Table table = make();
};

template <int kN, int... I>
MOEFIN_SORT_HD void sort_desc_seq(std::uint32_t (&x)[kN], std::integer_sequence<int, I...>) {
  // The indices travel as template arguments: constants, and no use of the table in device code.
  auto exchange = [&](auto ca, auto cb) {
    constexpr int a = decltype(ca)::value, b = decltype(cb)::value;
    std::uint32_t const hi = x[a] > x[b] ? x[a] : x[b];
    std::uint32_t const lo = x[a] > x[b] ? x[b] : x[a];
    x[a] = hi;
    x[b] = lo;
  };
  (exchange(std::integral_constant<int, Network<kN>::table.a[I]>{},
            std::integral_constant<int, Network<kN>::table.b[I]>{}),
   ...);
}

/// Sorts x descending (x[0] the largest).
template <int kN>
MOEFIN_SORT_HD void sort_desc(std::uint32_t (&x)[kN]) {
  sort_desc_seq<kN>(x, std::make_integer_sequence<int, exchanges<kN>()>{});
}

} // namespace moefin::routing::net
