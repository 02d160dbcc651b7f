#pragma once
// The Kokkos reference of a whole layer, kernel by kernel in the order of its layer plan: what
// the chain's output is checked against (moefin equivalence, the gpu tests).

#include "core/ops/layer_plan.hpp"
#include "kernels/chain/chain.hpp"

#include <cstdint>
#include <vector>

namespace moefin::chain_run {

/// The layer's output for routing `seed` computed by the Kokkos references of the plan's kernels,
/// in the plan's order (routing with tile 1, so no padding rows; only the experts used are
/// copied from the device).
std::vector<std::uint16_t> reference_output(chain::LayerPlan const& plan,
                                            chain::LayerWeights const& w, std::int64_t tokens,
                                            std::uint64_t seed,
                                            std::vector<std::uint16_t> const& hidden);

} // namespace moefin::chain_run
