#pragma once
// The finalize reduction inside GEMM2 (no finalize launch): the contract between the grouped
// GEMM's fused epilogue (kernels/gemm, gemm::run_fused) and fused_finalize.cuh. Host-visible: no
// CUDA.
//
// Every (token, slice of kSliceCols output columns) has an arrival counter. A GEMM2 warp that has
// stored its work item (rows of one expert x kSliceCols columns of gemm2_out) publishes the
// stores (every lane fences, then the warp meets at a barrier) and adds one to the counter of the
// slice of every token among its rows. The warp whose add completes a token's local expert rows
// (the valid entries of expanded_to_permuted) fences (acquire) and reads every one of those rows
// through L2, then writes out[token, slice] as reference::finalize does: an fp32 sum in ascending
// k, each product and each sum rounded (no fused multiply-add), bf16 round to nearest even. Which
// warp finishes a token depends on the schedule; what it computes does not, so the output is
// bitwise equal to the separate scalar finalize over the same gemm2_out, with PDL on or off.
//
// The counters are cleared by GEMM1 of the same layer after its grid-dependency wait
// (gemm::run_clearing): GEMM1 completes before GEMM2 passes its wait (activation waits on every
// path in between), and it starts its clear only after the previous layer's GEMM2 completed, so
// every layer starts from zero whatever the buffer held (the chain poisons it once per batch).
// After a layer each counter holds its token's count of valid experts (0 for padding-free
// tokens that have none). Tokens without a local expert have no rows: the GEMM's warps write
// their zeros (every warp a strided share of the tokens). The count assumes routing's arrays
// agree with each other (every valid index names a row of that token that this GEMM computes);
// where they do not, that token's slice stays unwritten (poisoned).

#include "core/ops/finalize_params.hpp"

#include <cstdint>

namespace moefin::finalize::fused {

/// Output columns per counter: the columns of one GEMM2 work item (gemm::Policy::kWarpCols).
inline constexpr int kSliceCols = 16;
/// Largest top-K the finishing warp sums (two metadata registers per lane).
inline constexpr int kMaxTopK = 64;

struct FusedParams {
  // The finalize view of GEMM2's output: gemm_out = GEMM2's c, hidden_padded = its ldc,
  // num_rows = its max_rows, hidden = its n; out, expert_weights, expanded_to_permuted,
  // num_tokens, top_k and weight_type as for finalize.
  FinalizeParams fin;
  std::int32_t const* permuted_to_token = nullptr; // [num_rows]: token of a row, < 0 padding
  std::int32_t* counters = nullptr; // [num_tokens][hidden / kSliceCols], cleared by GEMM1
};

/// Counters (int32) of a layer (constexpr: the device code counts them too).
constexpr std::int64_t counter_count(std::int64_t tokens, std::int64_t hidden) {
  return tokens * (hidden / kSliceCols);
}

} // namespace moefin::finalize::fused
