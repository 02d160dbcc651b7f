#pragma once
// Device helpers of the routing kernels: the selection order, warp reductions and the end of a
// token's selection (weights, outputs, mask bits), shared by kernels/routing/routing_kernels.cuh
// and kernels/routing/fast_routing_kernels.cuh.

#include "core/ops/routing_params.hpp"

#include <cuda_bf16.h>

#include <cstdint>

namespace moefin::routing {

struct Candidate {
  float score;
  std::int32_t id;
};

/// The selection order of the contract: larger score first, ties to the lower expert id.
__device__ __forceinline__ bool better(Candidate a, Candidate b) {
  return a.score > b.score || (a.score == b.score && a.id < b.id);
}

__device__ __forceinline__ Candidate warp_best(Candidate c) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    Candidate o;
    o.score = __shfl_xor_sync(0xffffffffu, c.score, off);
    o.id = __shfl_xor_sync(0xffffffffu, c.id, off);
    if (better(o, c))
      c = o;
  }
  return c;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

/// Whether the weights are a softmax over every expert (not renormalized over the K chosen):
/// then each lane's sum of expf(score - top) over all its experts is needed.
__device__ __forceinline__ bool softmax_over_all(RoutingParams const& p) {
  return p.method == Method::kSoftmaxTopK && !p.renormalize;
}

/// The end of token t's selection by the calling warp, lane k holding the k-th expert (`mine`,
/// lanes >= K unused) and `top` the largest score: softmax weights, expert ids and weights
/// written, and the token's bit set in the `words`-word masks of its local experts.
/// `lane_all()` is this lane's sum of expf(score - top) over its experts (lane + 32 j, j
/// ascending), evaluated only for softmax over every expert without renormalization.
template <class LaneAll>
__device__ __forceinline__ void finish_token(RoutingParams const& p, std::int64_t t, Candidate mine,
                                             float top, LaneAll lane_all, std::uint32_t* masks,
                                             int words) {
  int const lane = threadIdx.x & 31;
  int const K = static_cast<int>(p.top_k);
  bool const over_all = softmax_over_all(p);
  float const all = over_all ? warp_sum(lane_all()) : 0.0f;
  float const e_mine = lane < K ? expf(mine.score - top) : 0.0f;
  float const sel = warp_sum(e_mine);
  float const w = over_all ? e_mine / all : e_mine / sel;
  if (lane < K) {
    std::int64_t const e = t * K + lane;
    p.expert_ids[e] = mine.id;
    if (p.weight_type == finalize::WeightType::kFp32)
      static_cast<float*>(p.expert_weights)[e] = w;
    else
      static_cast<__nv_bfloat16*>(p.expert_weights)[e] = __float2bfloat16_rn(w);
    std::int64_t const local = mine.id - p.local_expert_begin;
    if (local >= 0 && local < p.num_local_experts)
      atomicOr(&masks[local * words + (t >> 5)], 1u << (t & 31));
  }
}

} // namespace moefin::routing
