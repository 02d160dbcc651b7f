#pragma once
// The decode routing kernel of kernels/routing/fast_routing.hpp.

#include "kernels/common/cp_async.cuh"
#include "kernels/common/pdl_stage.cuh"
#include "kernels/routing/fast_routing.hpp"
#include "kernels/routing/routing_device.cuh"
#include "kernels/routing/sort_network.hpp"

#include <cstdint>

namespace moefin::routing {

namespace fast {

/// The selection's key of a score (routing::score_key, shared with the host's twin).
__device__ __forceinline__ std::uint32_t ordered(float f) {
  return score_key(f);
}

__device__ __forceinline__ float unordered(std::uint32_t key) {
  return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

/// The largest of n keys by a tree of maxima (n a power of two).
template <int kN>
__device__ __forceinline__ std::uint32_t tree_max(std::uint32_t const (&key)[kN]) {
  std::uint32_t m[kN];
#pragma unroll
  for (int j = 0; j < kN; ++j)
    m[j] = key[j];
#pragma unroll
  for (int step = 1; step < kN; step <<= 1)
#pragma unroll
    for (int j = 0; j + step < kN; j += 2 * step)
      m[j] = max(m[j], m[j + step]);
  return m[0];
}

/// The lowest j with key[j] == v (v one of the keys): a bit per key, or-ed by a tree, then the
/// lowest set bit; every compare is independent of the others.
template <int kN>
__device__ __forceinline__ int lowest_index_of(std::uint32_t const (&key)[kN], std::uint32_t v) {
  std::uint32_t b[kN];
#pragma unroll
  for (int j = 0; j < kN; ++j)
    b[j] = key[j] == v ? 1u << j : 0u;
#pragma unroll
  for (int step = 1; step < kN; step <<= 1)
#pragma unroll
    for (int j = 0; j + step < kN; j += 2 * step)
      b[j] |= b[j + step];
  return __ffs(b[0]) - 1;
}

__device__ __forceinline__ std::uint32_t warp_max(std::uint32_t v) {
  std::uint32_t r;
  asm volatile("redux.sync.max.u32 %0, %1, 0xffffffff;" : "=r"(r) : "r"(v));
  return r;
}

} // namespace fast

/// kPer scores per lane (expert lane + 32 j). Dynamic shared memory: the token masks [L], the
/// offsets [L + 1], the selected experts [T K], the warp totals of the scan [32] and the scores
/// [T E].
template <int kPer>
__global__ void __launch_bounds__(1024) routing_fast_kernel(RoutingParams p, PdlDevice k) {
  extern __shared__ std::uint32_t smem[];
  int const L = static_cast<int>(p.num_local_experts);
  int const E = static_cast<int>(p.num_experts);
  int const K = static_cast<int>(p.top_k);
  int const T = static_cast<int>(p.num_tokens);
  int const tile = static_cast<int>(p.tile);
  int const begin = static_cast<int>(p.local_expert_begin);
  std::uint32_t* const masks = smem;
  auto* const offs = reinterpret_cast<std::int32_t*>(masks + L);
  std::int32_t* const sel = offs + L + 1;
  std::int32_t* const part = sel + T * K;
  float* const scores = reinterpret_cast<float*>(part + 32);
  int const tid = threadIdx.x, nt = blockDim.x, lane = tid & 31, warp = tid >> 5;
  int const warps = nt / 32;

  pdl_enter(k);
#pragma unroll 1
  for (int i = tid; i < L; i += nt)
    masks[i] = 0;
  pdl_wait_point(k);
  // Every score into shared memory by every thread: copies issued back to back with no register
  // round trip, so the block pays one load latency. Loaded by the selecting warps themselves,
  // ptxas interleaves the guarded loads with their uses and pays it once per few loads (the
  // Nsight Compute samples of scripts/gpu/ncu.sh: a long-scoreboard stall at every other load).
#pragma unroll 1
  for (int i = tid; i < T * E; i += nt)
    cp_async4(scores + i, p.scores + i);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  if (warp < T) {
    std::int64_t const t = warp;
    float const* s = scores + t * E;
    // The lane's keys, 0 for experts past E.
    auto load_keys = [&](std::uint32_t(&key)[kPer]) {
#pragma unroll
      for (int j = 0; j < kPer; ++j)
        key[j] = lane + 32 * j < E ? fast::ordered(s[lane + 32 * j]) : 0u;
    };
    // The lane's keys sorted (descending): each pass of the selection then takes a warp-wide max
    // of the heads and shifts the winner's list by one, a short dependent chain; the expert ids
    // are looked up once after the passes. That needs every non-zero key of a lane to be
    // distinct (equal keys are adjacent once sorted); a warp with a lane holding a score twice
    // (rare: equal scores of one token in one lane) takes the general selection below. Host
    // twin of this test: routing::fast_selection_is_sorted.
    std::uint32_t srt[kPer];
    load_keys(srt);
    float const top = fast::unordered(fast::warp_max(fast::tree_max<kPer>(srt)));
    // Softmax over every expert needs each lane's sum, in expert order (the block kernel's).
    float lane_sum = 0.0f;
    if (softmax_over_all(p))
#pragma unroll
      for (int j = 0; j < kPer; ++j)
        if (lane + 32 * j < E)
          lane_sum += expf(fast::unordered(srt[j]) - top);
    net::sort_desc<kPer>(srt);
    bool repeated = false;
#pragma unroll
    for (int j = 0; j + 1 < kPer; ++j)
      repeated |= srt[j] != 0u && srt[j] == srt[j + 1];
    Candidate mine{-INFINITY, -1};
    if (!__any_sync(0xffffffffu, repeated)) {
      // The lowest j whose score in lane `src` has key v, from the scores in shared memory, so
      // that only the sorted keys stay in registers through the passes.
      auto index_of = [&](int src, std::uint32_t v) {
        std::uint32_t bits = 0;
#pragma unroll
        for (int j = 0; j < kPer; ++j)
          bits |= (src + 32 * j < E && fast::ordered(s[src + 32 * j]) == v ? 1u : 0u) << j;
        return __ffs(bits) - 1;
      };
      std::uint32_t won_key = 0; // lane kk: the key of pass kk and the lane that held it
      int owner = 0;
#pragma unroll 1
      for (int kk = 0; kk < K; ++kk) {
        std::uint32_t const best = fast::warp_max(srt[0]);
        bool won = srt[0] == best;
        std::uint32_t const tied = __ballot_sync(0xffffffffu, won);
        int winner = __ffs(tied) - 1;
        if ((tied & (tied - 1)) != 0) {
          // Equal heads in several lanes: the lowest expert id wins (uniform branch).
          // index_of(lane, best), rolled: unrolled inside the passes it makes the 32-key
          // kernel spill 56 bytes (the sorted keys stay in registers around this rare branch).
          int j = 0;
          if (won)
#pragma unroll 1
            for (; j < kPer - 1; ++j)
              if (fast::ordered(s[lane + 32 * j]) == best)
                break;
          std::uint32_t const low = fast::warp_max(won ? 1024u - (lane + 32 * j) : 0u);
          winner = (1024 - static_cast<int>(low)) & 31;
          won = lane == winner;
        }
        if (lane == kk) {
          won_key = best;
          owner = winner;
        }
#pragma unroll
        for (int j = 0; j < kPer; ++j)
          srt[j] = won ? (j + 1 < kPer ? srt[j + 1] : 0u) : srt[j];
      }
      // The expert of pass `lane`: the one key of its owner lane equal to it.
      if (lane < K)
        mine = Candidate{fast::unordered(won_key), owner + 32 * index_of(owner, won_key)};
    } else {
      // General selection: each lane's best remaining key and its lowest j by trees over the
      // unsorted keys (0 once selected), rebuilt after every pass (log2(kPer) dependent steps a
      // pass).
      std::uint32_t key[kPer];
      load_keys(key);
      std::uint32_t bkey = 0;
      int bj = 0;
      auto rescan = [&]() {
        bkey = fast::tree_max<kPer>(key);
        bj = fast::lowest_index_of<kPer>(key, bkey);
      };
      rescan();
#pragma unroll 1
      for (int kk = 0; kk < K; ++kk) {
        // The warp's largest key; the lane holding it, or among tied lanes the one of the
        // lowest expert id (a second reduction, taken only on a tie: uniform over the warp).
        std::uint32_t const best = fast::warp_max(bkey);
        std::uint32_t const tied = __ballot_sync(0xffffffffu, bkey == best);
        int winner = __ffs(tied) - 1;
        if ((tied & (tied - 1)) != 0) {
          std::uint32_t const low = fast::warp_max(bkey == best ? 1024u - (lane + 32 * bj) : 0u);
          winner = (1024 - static_cast<int>(low)) & 31;
        }
        int const id = __shfl_sync(0xffffffffu, lane + 32 * bj, winner);
        if (lane == kk)
          mine = Candidate{fast::unordered(best), id};
        // Every lane runs the update (the others change nothing): no divergent branch to
        // reconverge from before the next reduction.
        bool const won = lane == winner;
#pragma unroll
        for (int j = 0; j < kPer; ++j)
          key[j] = won && j == bj ? 0u : key[j];
        rescan();
      }
    }
    finish_token(
        p, t, mine, top, [&] { return lane_sum; }, masks, 1);
    if (lane < K)
      sel[t * K + lane] = mine.id;
  }
  __syncthreads();

  // Tile-padded sizes of this thread's contiguous experts, then a block-wide exclusive scan.
  int const per = (L + nt - 1) / nt;
  int const x0 = min(L, tid * per), x1 = min(L, x0 + per);
  auto padded = [&](int c) { return (c + tile - 1) / tile * tile; };
  int sum = 0;
#pragma unroll 1
  for (int x = x0; x < x1; ++x)
    sum += padded(__popc(masks[x]));
  int incl = sum;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    int const y = __shfl_up_sync(0xffffffffu, incl, off);
    if (lane >= off)
      incl += y;
  }
  if (lane == 31)
    part[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    int w = lane < warps ? part[lane] : 0;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      int const y = __shfl_up_sync(0xffffffffu, w, off);
      if (lane >= off)
        w += y;
    }
    part[lane] = w;
  }
  __syncthreads();
  int const total = part[warps - 1];
  int run = (warp > 0 ? part[warp - 1] : 0) + incl - sum;
  // Every element of every output array is written exactly once, so no barrier is needed
  // between the fills and the scatter below.
#pragma unroll 1
  for (int x = x0; x < x1; ++x) {
    int const c = __popc(masks[x]);
    int const size = padded(c);
    offs[x] = run;
    p.expert_counts[x] = c;
    p.expert_offsets[x] = run;
#pragma unroll 1
    for (int r = run; r < run + size; r += tile)
      p.cta_to_expert[r / tile] = x;
#pragma unroll 1
    for (int r = run + c; r < run + size; ++r) {
      p.permuted_to_token[r] = -1;
      p.permuted_to_expanded[r] = -1;
    }
    run += size;
  }
  if (tid == 0) {
    offs[L] = total;
    p.expert_offsets[L] = total;
    *p.total_padded_rows = total;
  }
  int const tiles = static_cast<int>(p.max_padded_rows / tile);
#pragma unroll 1
  for (int i = total / tile + tid; i < tiles; i += nt)
    p.cta_to_expert[i] = -1;
#pragma unroll 1
  for (std::int64_t r = total + tid; r < p.max_padded_rows; r += nt) {
    p.permuted_to_token[r] = -1;
    p.permuted_to_expanded[r] = -1;
  }
  __syncthreads(); // offs of every expert
#pragma unroll 1
  for (int e = tid; e < T * K; e += nt) {
    int const x = sel[e] - begin;
    if (x < 0 || x >= L) {
      p.expanded_to_permuted[e] = -1;
      continue;
    }
    int const t = e / K;
    int const row = offs[x] + __popc(masks[x] & ((1u << t) - 1u));
    p.expanded_to_permuted[e] = row;
    p.permuted_to_token[row] = t;
    p.permuted_to_expanded[row] = e;
  }
  pdl_exit(k);
}

} // namespace moefin::routing
