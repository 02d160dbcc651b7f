#pragma once
// The released FlashInfer routing, permute and activation kernels (flashinfer-python 0.7.2.post1:
// routingCustom's block kernels in trtllm_fused_moe_routing_custom.cuh, permuteKernel and
// activationKernel in trtllm_fused_moe_dev_kernel.cu) driven by moefin's params, each launched
// on its own with the released geometry and the PDL attribute on or off. Host-visible header:
// no CUDA and no FlashInfer includes; without the released build every call throws.
//
// What the released kernels produce and consume, against moefin's layout
// (docs/design/computation.md, core/layout.hpp); the moefin field each released one maps to: -
// routing (scores [T, E] fp32 -> routingCustom::Data): expanded_to_permuted
// (mPtrExpandedIdxToPermutedIdx, -1 for experts outside the local range), permuted_to_token
// (mPtrPermutedIdxToTokenIdx, -1 on padding rows of written tiles), permuted_to_expanded
// (mPtrPermutedIdxToExpandedIdx; padding rows NOT written), cta_to_expert (mPtrCtaIdxXyToBatchIdx,
// local expert of each tile; tiles past the end NOT written), total_padded_rows
// (mPtrPermutedIdxSize), expert_weights (mPtrTopKWeights, bf16 or fp32). Rows are grouped by local
// expert ascending and by token inside a group, each group padded to a multiple of `tile`
// (mTileTokensDim), as in moefin. The released kernels also write the per-tile row limit and the
// tile count (RoutingExtras), which moefin has no field for, and do not write expert_ids,
// expert_counts or expert_offsets (left untouched). - permute: out[expanded_to_permuted[t*K+k], :]
// = in[t, :] for every k, with no test for -1: it needs every expert local (a dropped expert would
// be written one row before `permuted`), and it leaves padding rows unwritten (moefin's permute
// writes zeros there). - activation (SwiGLU only; the released ReLU^2 lives in the trtllm-gen GEMM1
// epilogue): out[r, j] = silu(in[r, inter + j]) * in[r, j], i.e. the gate in the SECOND half of
// each row, where moefin's GEMM1 writes it in the first; rows reached through expanded_to_permuted
// only (padding rows unwritten).

#include "core/ops/activation_params.hpp"
#include "kernels/finalize/finalize.hpp"
#include "core/ops/permute_params.hpp"
#include "core/ops/routing_params.hpp"

#include <cstdint>

namespace moefin::external::flashinfer {

/// The released routing kernels moefin launches on their own.
enum class RoutingKernel : std::int32_t {
  kBlock = 0, // routingIndicesBlockKernel: one CTA, T <= 4
  kDynBlock,  // routingIndicesDynBlockKernel: one CTA with dynamic shared memory, T <= 16,
              // at most 512 experts
};
char const* routing_kernel_name(RoutingKernel k); // "fi_routing_block", "fi_routing_dyn_block"

/// Released routing outputs moefin's RoutingParams has no field for (device memory).
struct RoutingExtras {
  std::int32_t* tile_row_limit = nullptr; // [max_padded_rows / tile]: mPtrCtaIdxXyToMnLimit
  std::int32_t* num_tiles = nullptr;      // [1]: mPtrNumNonExitingCtas
};

/// The kernel the released routingCustom::run would use for this shape among the block kernels
/// (the static block kernel up to 4 tokens, the dynamic one up to 16 tokens and 512 experts);
/// InputError beyond them, or for what the released routing does not support (weights none,
/// a method/expert-count/top-K without a compiled tier, more than 32 experts per token).
RoutingKernel routing_kernel(routing::RoutingParams const& p);

/// Launches the released routing on `stream`. Method: kTopKSoftmax and kSoftmaxTopK with
/// renormalize are the released Renormalize policy (top-K of the raw scores, softmax over the K;
/// the released code treats softmax -> top-K -> renormalize as the same function), kSoftmaxTopK
/// without renormalize is its Default (softmax over all experts, top-K).
void run_routing(routing::RoutingParams const& p, RoutingExtras const& x, RoutingKernel k, bool pdl,
                 Stream stream);

/// Launches permuteKernel: p.hidden_states -> p.permuted through `expanded_to_permuted` (every
/// expert must be local, see above). Grid (ceil(H/256), min(8192, T)) of 256 threads.
void run_permute(permute::PermuteParams const& p, std::int32_t const* expanded_to_permuted,
                 std::int64_t top_k, bool pdl, Stream stream);

/// Launches activationKernel (SwiGLU with the gate in the second half, see above) over the rows
/// that `expanded_to_permuted` names. Grid (2*inter/128, K, min(8192, T)) of 256 threads.
void run_activation(activation::ActivationParams const& p, std::int32_t const* expanded_to_permuted,
                    std::int64_t num_tokens, std::int64_t top_k, bool pdl, Stream stream);

} // namespace moefin::external::flashinfer
