#pragma once
// small_batch_v2: moefin's own small-batch finalize kernel (small_batch_v2.hpp has the design
// and the geometry). Device code only; the launches are in small_batch_v2_dispatch.cu.
//
// One CTA per (token, slice of `chunks` 128-bit column chunks); thread tid owns chunk
// tid / G of the slice and top-K group g = tid % G, so the G groups of a chunk sit in adjacent
// lanes of one warp. Group g owns experts k = g, g + G, g + 2G, ... (at most kL of them).
//   before the wait: each lane k of every warp reads the token's index and weight k once, and
//     every thread takes its experts' from those lanes by shuffles (metadata broadcast); the
//     row addresses and which loads happen are computed before the wait (anchored there by a
//     shared-memory store, see below), so that the GEMM-output loads issue right after it;
//   after the wait: at most kL independent 128-bit loads per thread, fused multiply-adds in
//     ascending j, then a butterfly of xor shuffles over the G lanes of a chunk (a fixed tree:
//     the same bits on every run), and lane g = 0 stores the chunk.
// Ablation switches (v2::Ingredient) undo one ingredient each: shared-memory combine instead of
// shuffles, per-thread metadata reads instead of the broadcast, addresses after the wait.

#include "kernels/finalize/finalize_kernels.cuh"
#include "kernels/finalize/small_batch_v2.hpp"

#include <type_traits>

namespace moefin::finalize::kernels {

/// Geometry of one launch as the kernel sees it (resolved by plan()).
struct V2Args {
  std::int32_t log2_groups = 0; // G = 1 << log2_groups top-K groups per chunk
  std::int32_t per_thread = 1;  // experts of one thread (<= kL)
  std::uint32_t ablate = 0;     // instrumented kernels only: v2::Ingredient bits switched off
};

inline constexpr int kV2MaxThreads = 512;

/// CTAs of kV2MaxThreads per SM the register allocation must allow (__launch_bounds__). Lean
/// kernels of at most 4 loads a thread fit in 40 registers without spilling (3 x 512 threads an
/// SM), 8 loads in 64; uncapped (bound 1), the shared-memory combine of the released lane layout
/// took 72, so 3 CTAs of 256 threads filled an SM where the released kernel (43) fits 5, and a
/// grid of 512 CTAs ran in two waves (H200: 3.0-3.3 us against the released kernel's 2.2 us at
/// T = 32-128, K = 22-32, mode a). The instrumented kernels stay uncapped: no spill in the race
/// experiments.
template <int kL, bool kInstrumented>
inline constexpr int kV2MinBlocks = kInstrumented ? 1 : (kL <= 4 ? 3 : 2);

/// Whether ingredient `bit` is on: a compile-time answer for lean kernels (kOff), the launch's
/// for instrumented ones.
template <class K, std::uint32_t kOff>
__device__ __forceinline__ bool v2_on(V2Args const& a, std::uint32_t bit) {
  if constexpr (std::is_same_v<K, Knobs>)
    return (a.ablate & bit) == 0;
  else
    return (kOff & bit) == 0;
}

/// acc[0..7] = w * the 8 bf16 of v + acc, one rounding per element.
__device__ __forceinline__ void fma8(float (&acc)[8], float w, uint4 v) {
  std::uint32_t const words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    acc[2 * i] = __fmaf_rn(w, bf16_lo(words[i]), acc[2 * i]);
    acc[2 * i + 1] = __fmaf_rn(w, bf16_hi(words[i]), acc[2 * i + 1]);
  }
}

template <int kL, class K, std::uint32_t kOff>
__global__ void __launch_bounds__(kV2MaxThreads, (kV2MinBlocks<kL, std::is_same_v<K, Knobs>>))
    finalize_small_batch_v2(FinalizeParams const p, V2Args const a, K const k) {
  constexpr bool kInstrumented = std::is_same_v<K, Knobs>;
  constexpr bool kMaySmem = kInstrumented || (kOff & (v2::kShuffle | v2::kWarpGroups)) != 0;
  CtaStamps st(k);
  trigger_if(k, Trigger::kEntry, st);

  int const tid = static_cast<int>(threadIdx.x);
  int const lg = a.log2_groups;
  int const groups = 1 << lg;
  // Lane layout: a chunk's groups in adjacent lanes (v2's, for the shuffle combine), or, with
  // kWarpGroups (small_batch_v2_fi_layout), the released kernel's: consecutive threads take
  // consecutive chunks of one group, the groups combine through shared memory.
  bool const across = !v2_on<K, kOff>(a, v2::kWarpGroups);
  int const per_cta = static_cast<int>(blockDim.x) >> lg; // chunks of one CTA
  int const g = across ? tid / per_cta : tid & (groups - 1);
  int const local_chunk = across ? tid % per_cta : tid >> lg;
  int const lane = tid & 31;
  int const top_k = static_cast<int>(p.top_k);
  std::int64_t const meta0 = static_cast<std::int64_t>(blockIdx.y) * top_k; // e = t * K + k
  int const chunk = static_cast<int>(blockIdx.x) * per_cta + local_chunk;
  bool const live = chunk < static_cast<int>(p.hidden / Policy::kVecElems);
  // plan() keeps blockDim.x a multiple of 32: every warp is full.
  constexpr unsigned kAll = 0xffffffffu;

  std::int32_t perm[kL];
  float w[kL];
  auto read_metadata = [&] {
    if (v2_on<K, kOff>(a, v2::kBroadcast)) {
      bool const wide = top_k > 32; // uniform: two metadata registers per lane
      std::int32_t mp0 = -1, mp1 = -1;
      float mw0 = 0.0f, mw1 = 0.0f;
      if (lane < top_k) {
        mp0 = p.expanded_to_permuted[meta0 + lane];
        mw0 = load_weight<kRuntimeWeights>(p, meta0 + lane);
      }
      if (wide && lane + 32 < top_k) {
        mp1 = p.expanded_to_permuted[meta0 + lane + 32];
        mw1 = load_weight<kRuntimeWeights>(p, meta0 + lane + 32);
      }
#pragma unroll
      for (int j = 0; j < kL; ++j) {
        int const kk = g + (j << lg);
        std::int32_t q = __shfl_sync(kAll, mp0, kk & 31);
        float x = __shfl_sync(kAll, mw0, kk & 31);
        if (wide) {
          std::int32_t const q1 = __shfl_sync(kAll, mp1, kk & 31);
          float const x1 = __shfl_sync(kAll, mw1, kk & 31);
          if (kk >= 32) {
            q = q1;
            x = x1;
          }
        }
        bool const mine = j < a.per_thread && kk < top_k;
        perm[j] = mine ? q : -1;
        w[j] = mine ? x : 0.0f;
      }
    } else {
#pragma unroll
      for (int j = 0; j < kL; ++j) {
        int const kk = g + (j << lg);
        bool const mine = j < a.per_thread && kk < top_k;
        perm[j] = mine ? p.expanded_to_permuted[meta0 + kk] : -1;
        w[j] = mine ? load_weight<kRuntimeWeights>(p, meta0 + kk) : 0.0f;
      }
    }
  };

  // Which loads happen and from where: byte offsets as one multiply-add of the index by the
  // row stride (plan() keeps a row under 2 GiB). A skipped expert keeps weight 0 and a zero
  // vector, so the multiply-adds need no branch: 0 * 0 + acc == acc exactly.
  auto const* base = static_cast<char const*>(p.gemm_out) +
                     static_cast<std::int64_t>(chunk) * (Policy::kVecElems * 2);
  int const row_bytes = static_cast<int>(p.hidden_padded) * 2;
  auto const rows = static_cast<std::uint32_t>(p.num_rows);
  char const* src[kL];
  bool use[kL];
  auto addresses = [&] {
#pragma unroll
    for (int j = 0; j < kL; ++j) {
      use[j] = live && static_cast<std::uint32_t>(perm[j]) < rows;
      src[j] = base + static_cast<std::int64_t>(perm[j]) * row_bytes;
      w[j] = use[j] ? w[j] : 0.0f;
    }
  };

  if (k.meta_first())
    read_metadata();
  // The anchor is the one bit that adds instead of removing (small_batch_v2_anchor).
  if (k.meta_first() && !v2_on<K, kOff>(a, v2::kAnchor)) {
    addresses();
    // ptxas keeps memory operations on their side of griddepcontrol.wait but moves arithmetic
    // across it (without this, the address arithmetic lands after the wait). A shared-memory
    // store of a value that depends on every address and predicate has to execute before the
    // wait, so they are computed there and the loads issue right after it. Never read.
    __shared__ std::uint32_t s_anchor[kV2MaxThreads];
    std::uint32_t x = 0;
#pragma unroll
    for (int j = 0; j < kL; ++j) {
      auto const addr = reinterpret_cast<std::uintptr_t>(src[j]);
      x ^= static_cast<std::uint32_t>(addr) ^ static_cast<std::uint32_t>(addr >> 32) ^
           (use[j] ? 1u << j : 0u) ^ __float_as_uint(w[j]);
    }
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(
                     static_cast<std::uint32_t>(__cvta_generic_to_shared(&s_anchor[tid]))),
                 "r"(x)
                 : "memory");
    wait_primary(k, st);
  } else {
    wait_primary(k, st);
    if (!k.meta_first())
      read_metadata();
    addresses();
  }

  uint4 v[kL];
#pragma unroll
  for (int j = 0; j < kL; ++j)
    v[j] = use[j] ? *reinterpret_cast<uint4 const*>(src[j]) : make_uint4(0, 0, 0, 0);
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
  for (int j = 0; j < kL; ++j)
    fma8(acc, w[j], v[j]);

  if (groups > 1) {
    if (v2_on<K, kOff>(a, v2::kShuffle) && !across) {
      for (int o = groups >> 1; o > 0; o >>= 1)
#pragma unroll
        for (int i = 0; i < 8; ++i)
          acc[i] += __shfl_xor_sync(kAll, acc[i], o);
    } else if constexpr (kMaySmem) {
      // The seed's combine, through shared memory, in ascending group order (the no_shuffle
      // ablation, and the released lane layout, whose groups are in different warps).
      int const stride = across ? per_cta : 1;
      __shared__ float4 s_part[kV2MaxThreads][2];
      s_part[tid][0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
      s_part[tid][1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
      __syncthreads();
      if (g == 0)
        for (int h = 1; h < groups; ++h) {
          float4 const x = s_part[tid + h * stride][0];
          float4 const y = s_part[tid + h * stride][1];
          acc[0] += x.x;
          acc[1] += x.y;
          acc[2] += x.z;
          acc[3] += x.w;
          acc[4] += y.x;
          acc[5] += y.y;
          acc[6] += y.z;
          acc[7] += y.w;
        }
    }
  }

  if (live && g == 0) {
    delay_before_write(k);
    store8(static_cast<__nv_bfloat16*>(p.out) + static_cast<std::int64_t>(blockIdx.y) * p.hidden +
               static_cast<std::int64_t>(chunk) * Policy::kVecElems,
           acc);
  }
  if (k.snap() && blockIdx.x == 0 && local_chunk == 0)
#pragma unroll
    for (int j = 0; j < kL; ++j) {
      int const kk = g + (j << lg);
      if (j < a.per_thread && kk < top_k)
        k.snap()[meta0 + kk] = perm[j];
    }
  trigger_after_writes(k, st);
  st.finish();
}

} // namespace moefin::finalize::kernels
