#pragma once
// Kokkos reference of routing from router scores (docs/design/computation.md), host execution space
// (implied). Same params as the CUDA routing kernels (core/ops/routing_params.hpp), host
// pointers; `total_padded_rows` points to a host int.

#include "core/ops/routing_params.hpp"

namespace moefin::reference {

/// Selection and weights per token as moefin::route_token (core/routing.hpp): the K largest
/// scores (ties to the lower expert id) in descending order, softmax/top-K per `method`, weights
/// stored as bf16 (round to nearest even of the fp32 weight) or fp32, none for kNone.
/// Layout as moefin::build_layout (core/layout.hpp), computed independently: a histogram of the
/// local experts, a tile-padded exclusive scan, a scatter in expanded order (so the rows of one
/// expert are in token order) and the tile -> expert map. Rows [total, max_padded_rows) of the
/// permuted maps and tiles [total / tile, max_padded_rows / tile) of cta_to_expert are set to -1.
/// Throws InputError for bad sizes, null outputs, non-finite scores, or a layout that does not fit
/// max_padded_rows.
void routing(routing::RoutingParams const& p);

} // namespace moefin::reference
