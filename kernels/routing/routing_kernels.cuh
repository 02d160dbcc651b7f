#pragma once
// Routing kernels: top-K selection (one warp per token), softmax weights, and the permuted
// layout (per-expert token bitmasks, padded prefix scan, permutation). The permuted order is
// exactly core/layout.hpp's (experts ascending, tokens ascending inside each): the rank of token
// t in expert x's group is the number of bits below t in x's token mask, which no scheduling can
// change.

#include "kernels/common/pdl_stage.cuh"
#include "kernels/routing/routing.hpp"
#include "kernels/routing/routing_device.cuh"

#include <cuda_bf16.h>

#include <cstdint>

namespace moefin::routing {

inline constexpr int kMaskWords = Policy::kMaxTokens / 32;

/// Top-K of token t by the calling warp: writes expert ids and weights and sets the token's bit
/// in the masks of its local experts. The token's scores are staged once in `v` (the warp's
/// num_experts floats of shared memory): K passes over them cost no global round trips.
__device__ void select_token(RoutingParams const& p, std::int64_t t, std::uint32_t* masks,
                             float* v) {
  constexpr int kPerLane = Policy::kMaxExperts / 32;
  int const lane = threadIdx.x & 31;
  int const E = static_cast<int>(p.num_experts);
  int const K = static_cast<int>(p.top_k);
  float const* s = p.scores + t * p.num_experts;
  __syncwarp(); // the warp's previous token is done with v
  for (int x = lane; x < E; x += 32)
    v[x] = s[x];
  __syncwarp();
  std::uint32_t taken = 0; // bit j: expert lane + 32 j already selected
  Candidate mine{-INFINITY, -1};
  float top = 0.0f;
  for (int k = 0; k < K; ++k) {
    Candidate best{-INFINITY, 0x7fffffff};
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      int const x = lane + 32 * j;
      if (x < E && !(taken & (1u << j))) {
        Candidate const c{v[x], x};
        if (better(c, best))
          best = c;
      }
    }
    best = warp_best(best);
    if ((best.id & 31) == lane)
      taken |= 1u << (best.id >> 5);
    if (lane == k)
      mine = best;
    if (k == 0)
      top = best.score;
  }
  finish_token(
      p, t, mine, top,
      [&] {
        float all = 0.0f;
#pragma unroll
        for (int j = 0; j < kPerLane; ++j)
          if (lane + 32 * j < E)
            all += expf(v[lane + 32 * j] - top);
        return all;
      },
      masks, kMaskWords);
}

/// Reads a mask word written by other CTAs (L2, not a possibly stale L1 line) or by this one.
template <bool kGlobal> __device__ __forceinline__ std::uint32_t load_mask(std::uint32_t const* m) {
  if constexpr (kGlobal)
    return __ldcg(m);
  else
    return *m;
}

/// Counts, padded offsets, tile map and permutation from the masks, by one whole CTA.
/// `offs` is shared memory of num_local_experts + 1 entries, `part` of blockDim.x entries.
template <bool kGlobalMasks>
__device__ void build_layout(RoutingParams const& p, std::uint32_t const* masks, std::int32_t* offs,
                             std::int32_t* part) {
  int const tid = threadIdx.x;
  int const nt = blockDim.x;
  int const L = static_cast<int>(p.num_local_experts);
  int const tile = static_cast<int>(p.tile);
  int const chunk = (L + nt - 1) / nt;
  int const x0 = min(L, tid * chunk), x1 = min(L, x0 + chunk);
  auto count_of = [&](int x) {
    int c = 0;
#pragma unroll
    for (int w = 0; w < kMaskWords; ++w)
      c += __popc(load_mask<kGlobalMasks>(&masks[x * kMaskWords + w]));
    return c;
  };
  int sum = 0;
  for (int x = x0; x < x1; ++x)
    sum += (count_of(x) + tile - 1) / tile * tile;
  part[tid] = sum;
  __syncthreads();
  // Inclusive Hillis-Steele scan of the per-thread sums.
  for (int off = 1; off < nt; off <<= 1) {
    int const v = tid >= off ? part[tid - off] : 0;
    __syncthreads();
    part[tid] += v;
    __syncthreads();
  }
  int run = part[tid] - sum;
  for (int x = x0; x < x1; ++x) {
    int const c = count_of(x);
    offs[x] = run;
    p.expert_counts[x] = c;
    p.expert_offsets[x] = run;
    run += (c + tile - 1) / tile * tile;
  }
  int const total = part[nt - 1];
  if (tid == 0) {
    offs[L] = total;
    p.expert_offsets[L] = total;
    *p.total_padded_rows = total;
  }
  __syncthreads();
  int const tiles = static_cast<int>(p.max_padded_rows / tile);
  for (int r = tid; r < tiles; r += nt)
    p.cta_to_expert[r] = -1;
  for (std::int64_t r = tid; r < p.max_padded_rows; r += nt) {
    p.permuted_to_token[r] = -1;
    p.permuted_to_expanded[r] = -1;
  }
  __syncthreads();
  for (int x = x0; x < x1; ++x)
    for (int r = offs[x]; r < offs[x + 1]; r += tile)
      p.cta_to_expert[r / tile] = x;
  std::int64_t const n = p.num_tokens * p.top_k;
  for (std::int64_t e = tid; e < n; e += nt) {
    std::int64_t const local = __ldcg(&p.expert_ids[e]) - p.local_expert_begin;
    if (local < 0 || local >= L) {
      p.expanded_to_permuted[e] = -1;
      continue;
    }
    int const t = static_cast<int>(e / p.top_k);
    int rank = 0;
#pragma unroll
    for (int w = 0; w < kMaskWords; ++w) {
      std::uint32_t const m = load_mask<kGlobalMasks>(&masks[local * kMaskWords + w]);
      int const below = t - 32 * w; // bits of tokens < t in this word
      rank += below >= 32 ? __popc(m) : (below > 0 ? __popc(m & ((1u << below) - 1u)) : 0);
    }
    int const row = offs[local] + rank;
    p.expanded_to_permuted[e] = row;
    p.permuted_to_token[row] = t;
    p.permuted_to_expanded[row] = static_cast<std::int32_t>(e);
  }
}

/// Single CTA: every token, then the layout. Dynamic shared memory: masks, offsets, scan, each
/// warp's staged scores.
__global__ void __launch_bounds__(Policy::kBlockThreads)
    routing_block_kernel(RoutingParams p, PdlDevice k) {
  extern __shared__ std::uint32_t smem[];
  int const L = static_cast<int>(p.num_local_experts);
  std::uint32_t* masks = smem;
  auto* offs = reinterpret_cast<std::int32_t*>(masks + L * kMaskWords);
  std::int32_t* part = offs + L + 1;
  float* scores = reinterpret_cast<float*>(part + blockDim.x) + (threadIdx.x / 32) * p.num_experts;
  pdl_enter(k);
  pdl_wait_point(k);
  for (int i = threadIdx.x; i < L * kMaskWords; i += blockDim.x)
    masks[i] = 0;
  __syncthreads();
  int const warps = blockDim.x / 32;
  for (std::int64_t t = threadIdx.x / 32; t < p.num_tokens; t += warps)
    select_token(p, t, masks, scores);
  __syncthreads();
  build_layout<false>(p, masks, offs, part);
  pdl_exit(k);
}

/// Multi-CTA: one warp per token; the last CTA to finish (threadfence + ticket) builds the layout
/// from the global masks and clears the scratch for the next launch.
__global__ void routing_multi_kernel(RoutingParams p, PdlDevice k, std::uint32_t* masks,
                                     std::uint32_t* ticket) {
  extern __shared__ std::int32_t smem_i[];
  int const L = static_cast<int>(p.num_local_experts);
  std::int32_t* offs = smem_i;
  std::int32_t* part = offs + L + 1;
  float* scores = reinterpret_cast<float*>(part + blockDim.x) + (threadIdx.x / 32) * p.num_experts;
  __shared__ bool last;
  pdl_enter(k);
  pdl_wait_point(k);
  std::int64_t const t =
      static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (t < p.num_tokens)
    select_token(p, t, masks, scores);
  __threadfence(); // this CTA's ids, weights and mask bits before its ticket
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(ticket, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (last) {
    __threadfence();
    build_layout<true>(p, masks, offs, part);
    __syncthreads();
    for (int i = threadIdx.x; i < L * kMaskWords; i += blockDim.x)
      masks[i] = 0;
    if (threadIdx.x == 0)
      *ticket = 0;
  }
  pdl_exit(k);
}

} // namespace moefin::routing
