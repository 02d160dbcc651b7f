#pragma once
// A finalize case of the gpu tests (shape, row padding, routing, every expert dropped), its
// seeded host inputs and the edge shapes every finalize kernel is checked on. Shared by the
// tests of moefin's kernels and of the released ones.

#include "experiments/finalize/cases.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace moefin::test {

struct FinalizeCase {
  fin::Shape shape;
  std::int64_t pad = 0; // hidden_padded - hidden
  std::string routing = "uniform";
  bool all_dropped = false;
};

inline std::string describe(FinalizeCase const& c) {
  return fin::shape_key(c.shape) + ",Hp=" + std::to_string(c.shape.hidden + c.pad) +
         ",routing=" + c.routing + (c.all_dropped ? ",all dropped" : "");
}

/// Host inputs of a case, seeded by `run_seed` and its description; all_dropped marks every
/// expert remote.
inline fin::HostCase host_case(FinalizeCase const& c, std::uint64_t run_seed) {
  std::int64_t const hp = c.shape.hidden + c.pad;
  fin::RowPool pool(c.shape.hidden, hp, 99);
  auto h = fin::make_case(c.shape, hp, fin::parse_routing_case("routing", c.routing),
                          fin::case_seed(run_seed, describe(c)), pool, /*with_scales=*/true);
  if (c.all_dropped) {
    std::fill(h.layout.expanded_to_permuted.begin(), h.layout.expanded_to_permuted.end(), -1);
    h.valid_rows = 0;
    h.dropped = 1.0;
  }
  return h;
}

/// The edges of the shapes finalize serves.
inline std::vector<FinalizeCase> finalize_edge_cases() {
  using finalize::WeightType;
  return {
      {{1024, 1, 1, WeightType::kBf16}},                      // T = 1, K = 1
      {{7168, 1, 64, WeightType::kFp32}, 0, "uniform/ep2"},   // K = 64, dropped experts
      {{2880, 7, 6, WeightType::kNone}, 64},                  // no weights, Hp > H
      {{4096, 42, 22, WeightType::kBf16}, 0, "uniform/ep4"},  // mostly dropped
      {{1002, 5, 8, WeightType::kBf16}},                      // H not a multiple of 8
      {{1002, 3, 7, WeightType::kFp32}, 6},                   // unaligned, Hp > H
      {{2048, 3, 10, WeightType::kFp32}, 0, "uniform", true}, // every expert dropped
      {{256, 9000, 2, WeightType::kFp32}},                    // tokens beyond scalar's grid
      {{6144, 49, 32, WeightType::kBf16}, 8},                 // last T of the regime
      {{5120, 2, 5, WeightType::kNone}, 0, "uniform/ep2"},    // smallest split top-K
  };
}

} // namespace moefin::test
