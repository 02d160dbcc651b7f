#pragma once
// The finalize reduction inside GEMM2 (no separate finalize launch): the contract between a
// GEMM2 epilogue and fused_finalize.cuh. Host-visible: no CUDA.
//
// Every (token, slice of kSliceCols output columns) has a counter. A GEMM2 warp that has stored
// some rows of gemm2_out for one column slice calls fused::finish_rows (fused_finalize.cuh) with
// the rows and the slice: for each row of a token it publishes its stores (fence, release) and
// adds one to the token's counter of the slice; the warp whose add completes the token's local
// expert rows (the count of valid indices in expanded_to_permuted) reads every one of those
// rows after an acquire fence and writes out[token, slice] as finalize would: fp32 sum in
// ascending k, each product and sum rounded (no fused multiply-add), bf16 round to nearest even.
// That is reference::finalize's order: the fused output is bitwise equal to it and to the
// separate scalar finalize, whichever CTA finishes a token and whatever the schedule (PDL on or
// off). The finishing warp resets the counter to zero, so the counters are zero again when the
// kernel completes (allocate them zeroed once). Tokens without a local expert have no rows:
// fused::zero_unrouted writes their zeros (every warp calls it once, after its items). The count
// assumes routing's arrays agree with each other (every valid index names a row this GEMM
// writes, of that token); where they do not, that token's output stays unwritten (poisoned).
//
// A GEMM2 that calls the hook (kernels/gemm: grouped_gemm_kernel<kM, true>) reads routing's
// expanded_to_permuted, expert_weights and permuted_to_token after its grid-dependency wait, as
// it reads the rest of routing's output; the race matrix and the verifier see it as gemm2
// reading those buffers after its wait and writing out (core/chain_config.cpp, "fused").

#include "core/ops/finalize_params.hpp"

#include <cstdint>

namespace moefin::finalize::fused {

/// Output columns per counter: the 16 columns of one GEMM2 warp item (gemm::Policy::kWarpCols).
inline constexpr int kSliceCols = 16;
/// Largest top-K the finishing warp handles (two metadata registers per lane).
inline constexpr int kMaxTopK = 64;

struct FusedParams {
  // The finalize view of GEMM2's output: gemm_out = GEMM2's c with hidden_padded = its ldc,
  // num_rows = its max_rows; out, expert_weights, expanded_to_permuted, num_tokens, hidden,
  // top_k and weight_type as for finalize. hidden must be a multiple of kSliceCols.
  FinalizeParams fin;
  std::int32_t const* permuted_to_token = nullptr; // [num_rows]: token of a row, < 0 padding
  std::int32_t* counters = nullptr; // [num_tokens][hidden / kSliceCols], zero before a launch
};

/// Counters (int32) a launch needs.
inline std::int64_t counter_count(FinalizeParams const& p) {
  return p.num_tokens * (p.hidden / kSliceCols);
}

} // namespace moefin::finalize::fused
