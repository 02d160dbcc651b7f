#pragma once
// The released kernels the released chain flavour launches (core/ops/layer_plan.hpp,
// released_flavour()), as a table the released build registers (kernels/external/flashinfer/
// flashinfer_chain_registrar.cpp). ChainRunner reaches them only through it, so every target that
// links moefin_kernels links without the released build; a run of the released flavour in a build
// without it fails with one line. Host-visible header: no CUDA.

#include "core/ops/activation_params.hpp"
#include "core/ops/permute_params.hpp"
#include "core/ops/routing_params.hpp"

#include <cstdint>
#include <string>

struct CUstream_st;

namespace moefin::chain {

struct ReleasedKernels {
  using Stream = CUstream_st*;
  /// InputError (one line) when the released routing cannot serve p (tokens, experts, top-K).
  void (*check_routing)(routing::RoutingParams const& p) = nullptr;
  /// The released routing block kernel for p's shape; it also writes the per-tile row limit
  /// [max_padded_rows / tile] and the tile count [1], which moefin has no field for.
  void (*routing)(routing::RoutingParams const& p, std::int32_t* tile_row_limit,
                  std::int32_t* num_tiles, bool pdl, Stream stream) = nullptr;
  void (*permute)(permute::PermuteParams const& p, std::int32_t const* expanded_to_permuted,
                  std::int64_t top_k, bool pdl, Stream stream) = nullptr;
  void (*activation)(activation::ActivationParams const& p,
                     std::int32_t const* expanded_to_permuted, std::int64_t num_tokens,
                     std::int64_t top_k, bool pdl, Stream stream) = nullptr;
};

/// The registered table, or nullptr in a build without the released kernels.
ReleasedKernels const* released_kernels();
/// Called once by the released build's registrar (static object).
void register_released_kernels(ReleasedKernels const& k);
/// InputError "<flag>: this build lacks the released FlashInfer kernels (<why>)" unless
/// registered; `why` names what the build says is missing.
void require_released_kernels(std::string const& flag);

} // namespace moefin::chain
