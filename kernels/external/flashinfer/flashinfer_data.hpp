#pragma once
// moefin's params as the released Data structs, which the released host code (run, and each
// kernel's KernelParams::setKernelParams) reads. Host only, but it includes the released
// DevKernel.h and RoutingKernel.h, so only the moefin_flashinfer target and its tests include it.

#include "kernels/external/flashinfer/flashinfer.hpp"
#include "kernels/external/flashinfer/flashinfer_chain.hpp"

#include "flashinfer/trtllm/fused_moe/DevKernel.h"
#include "flashinfer/trtllm/fused_moe/RoutingKernel.h"

namespace moefin::external::flashinfer {

/// Field by field (docs/design/computation.md -> DevKernel.h): gemm_out -> inPtr (bf16, mDtypeElt),
/// expert_weights -> expertWeightsPtr (mDtypeExpW bf16/fp32; nullptr for weights none),
/// expanded_to_permuted -> expandedIdxToPermutedIdx, out -> outPtr, num_tokens / top_k / hidden /
/// hidden_padded -> numTokens / topK / hiddenDim / hiddenDimPadded; inPtr2 (a second GEMM
/// output summed in) is never used. For the DeepSeek kernel (`deepseek` non-null) the scales and
/// the padded row count come from `deepseek`'s released layouts. numExperts is not read by any
/// finalize kernel and is set to 0. Checks nothing: plan() validates the shape first.
moe::dev::finalize::Data finalize_data(FinalizeParams const& p, bool pdl,
                                       DeepseekScales const* deepseek);

/// RoutingParams -> routingCustom::Data: scores -> mPtrScores (fp32 input), expert_weights ->
/// mPtrTopKWeights (mDtypeOutput bf16/fp32), expanded_to_permuted, permuted_to_expanded,
/// permuted_to_token, cta_to_expert -> mPtrCtaIdxXyToBatchIdx, total_padded_rows ->
/// mPtrPermutedIdxSize, the extras -> mPtrCtaIdxXyToMnLimit / mPtrNumNonExitingCtas;
/// local_expert_begin / num_local_experts -> mLocalExpertsStartIdx / mNumLocalExperts (stride 1),
/// tile -> mTileTokensDim and mPaddingLog2 (log2 for a power of two, else -1, as the released
/// runner computes it); the method as run_routing describes. The histogram scratch, the packed
/// top-K, given expert ids, the routing replay and the per-expert counts stay null.
moe::dev::routing::routingCustom::Data routing_data(routing::RoutingParams const& p,
                                                    RoutingExtras const& x, bool pdl);

/// PermuteParams -> permute::Data: hidden_states -> inPtr, permuted -> outPtr, hidden ->
/// hiddenDim, num_tokens, `top_k`, `expanded_to_permuted`; total_padded_rows ->
/// totalNumPaddedTokens (read only on the DeepSeek-FP8 path, which is off).
moe::dev::permute::Data permute_data(permute::PermuteParams const& p,
                                     std::int32_t const* expanded_to_permuted, std::int64_t top_k,
                                     bool pdl);

/// ActivationParams -> activation::Data: in -> inPtr, out -> outPtr, innerDim = 2 * inter,
/// `num_tokens`, `top_k`, `expanded_to_permuted`, total_padded_rows; no OAI SwiGLU controls.
moe::dev::activation::Data activation_data(activation::ActivationParams const& p,
                                           std::int32_t const* expanded_to_permuted,
                                           std::int64_t num_tokens, std::int64_t top_k, bool pdl);

} // namespace moefin::external::flashinfer
