#pragma once
// Grouped GEMM kernel (mma.sync m16n8k16, bf16 in, fp32 accumulation): warps stream their work
// items' operands through a cp.async pipeline in shared memory.
//
// The k dimension of one 32-wide step is permuted identically for A and B, which leaves the sum
// unchanged and lets each thread load its operands with single 128-bit loads: thread (g, q) of
// a warp (g = lane / 4, q = lane % 4) loads k = 8q .. 8q+7 of A rows g and g+8 and of B row g,
// and feeds words 2s, 2s+1 of them to mma step s (s = 0, 1) in the fragment positions that the
// PTX ISA assigns to logical k = 2q, 2q+1 and 2q+8, 2q+9.

#include "core/router_scores.hpp"
#include "kernels/common/pdl_stage.cuh"
#include "kernels/finalize/fused_finalize.cuh"
#include "kernels/gemm/gemm.hpp"
#include "kernels/gemm/mma.cuh"

#include <cuda_bf16.h>

#include <cstdint>

namespace moefin::gemm {

/// kM m16 tiles per row tile (tile_m = 16 kM). Each warp walks its work items (row tile,
/// kWarpCols columns: kN8 n8 tiles, weight rows col0 + 8 j + g) as one stream of loads of kG
/// k steps, kS - 1 of them in flight ahead of the MMAs, through its own slots of shared memory:
/// every thread reads back only what its own copies wrote, so no barrier is needed, and the
/// bytes in flight do not depend on the L1 size that the SM's carveout leaves.
/// kE: what else the kernel does (Epilogue); `f` is read only by the fused ones.
template <int kM, Epilogue kE>
__device__ __forceinline__ void grouped_gemm_body(GroupedGemmParams const& p, PdlDevice const& k,
                                                  finalize::fused::FusedParams const& f) {
  constexpr std::int64_t kTile = 16 * kM;
  constexpr int kN8 = Policy::kWarpCols / 8;
  constexpr int kG = Policy::group_steps(kTile);
  constexpr int kS = Policy::stages(kTile);
  constexpr int kSlots = Policy::slots(kTile);
  constexpr int kWarps = Policy::kThreads / 32;
  extern __shared__ uint4 stage_smem[];
  pdl_enter(k);
  pdl_wait_point(k);
  if constexpr (kE == Epilogue::kClearCounters)
    finalize::fused::clear_counters(f.counters,
                                    finalize::fused::counter_count(f.fin.num_tokens, f.fin.hidden));
  int const lane = threadIdx.x & 31;
  int const g = lane >> 2, q = lane & 3;
  // Slot i of stage st of this thread: mine[(st * kSlots + i) * 32].
  uint4* const mine = stage_smem + (threadIdx.x >> 5) * (kS * kSlots * 32) + lane;
  std::int64_t const total = std::min<std::int64_t>(*p.total_padded_rows, p.max_rows);
  std::int64_t const col_items = p.n / Policy::kWarpCols;
  std::int64_t const work = col_items * (total / kTile);
  int const steps = static_cast<int>(p.k / Policy::kStepK);
  int const groups = (steps + kG - 1) / kG;
  // Persistent: the grid is one resident wave (see resident_grid); the warps of a CTA take
  // adjacent column slices of one row tile.
  std::int64_t const first = blockIdx.x * static_cast<std::int64_t>(kWarps) + (threadIdx.x >> 5);
  std::int64_t const stride = static_cast<std::int64_t>(gridDim.x) * kWarps;
  std::int64_t const items = first < work ? (work - 1 - first) / stride + 1 : 0;
  std::int64_t const loads = items * groups;
  auto const* a = static_cast<__nv_bfloat16 const*>(p.a);
  auto const* b = static_cast<__nv_bfloat16 const*>(p.b);
  auto expert_of = [&](std::int64_t item) { return p.cta_to_expert[item / col_items]; };
  auto valid = [&](std::int32_t e) { return e >= 0 && e < p.num_local_experts; };

  // Issue side: the next load's item and group, and its item's sources.
  std::int64_t iss_load = 0, iss_item = first;
  int iss_group = 0, iss_stage = 0;
  __nv_bfloat16 const* b_row = b;
  __nv_bfloat16 const* a_row[kM][2] = {};
  bool b_on = false, a_on[kM][2] = {};
  auto issue_next = [&]() {
    if (iss_load < loads) {
      if (iss_group == 0) { // a new item: its expert, weight rows and non-padding rows
        std::int32_t const e = expert_of(iss_item);
        b_on = valid(e);
        std::int64_t const col0 = (iss_item % col_items) * Policy::kWarpCols;
        b_row = b + ((b_on ? e : 0) * p.n + col0 + g) * p.k + 8 * q;
        std::int64_t const row0 = iss_item / col_items * kTile;
#pragma unroll
        for (int m = 0; m < kM; ++m)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            std::int64_t const r = row0 + 16 * m + 8 * h + g;
            a_row[m][h] = a + r * p.k + 8 * q;
            a_on[m][h] = b_on && (p.row_token == nullptr || p.row_token[r] >= 0);
          }
      }
      uint4* const st = mine + iss_stage * (kSlots * 32);
#pragma unroll
      for (int s = 0; s < kG; ++s) {
        int const step = iss_group * kG + s;
        bool const in = step < steps;
        std::int64_t const kk = in ? static_cast<std::int64_t>(step) * Policy::kStepK : 0;
#pragma unroll
        for (int j = 0; j < kN8; ++j)
          cp_async16(st + (s * kN8 + j) * 32, b_row + 8 * j * p.k + kk, b_on && in);
#pragma unroll
        for (int m = 0; m < kM; ++m)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            cp_async16(st + (kG * kN8 + (s * kM + m) * 2 + h) * 32, a_row[m][h] + kk,
                       a_on[m][h] && in);
      }
      ++iss_load;
      if (++iss_group == groups) {
        iss_group = 0;
        iss_item += stride;
      }
      iss_stage = iss_stage + 1 == kS ? 0 : iss_stage + 1;
    }
    cp_async_commit(); // empty past the end: the wait below counts groups uniformly
  };

#pragma unroll
  for (int s = 0; s < kS - 1; ++s)
    issue_next();
  float acc[kM][kN8][4];
  std::int64_t item = first;
  int group = 0, stage = 0;
  for (std::int64_t l = 0; l < loads; ++l) {
    issue_next();
    cp_async_wait<kS - 1>(); // load l has landed
    if (group == 0) {
#pragma unroll
      for (int m = 0; m < kM; ++m)
#pragma unroll
        for (int j = 0; j < kN8; ++j)
#pragma unroll
          for (int i = 0; i < 4; ++i)
            acc[m][j][i] = 0.0f;
    }
    uint4 const* const st = mine + stage * (kSlots * 32);
#pragma unroll
    for (int s = 0; s < kG; ++s) {
      if (group * kG + s >= steps)
        break;
      uint4 bv[kN8];
      uint4 av[kM][2];
#pragma unroll
      for (int j = 0; j < kN8; ++j)
        bv[j] = st[(s * kN8 + j) * 32];
#pragma unroll
      for (int m = 0; m < kM; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          av[m][h] = st[(kG * kN8 + (s * kM + m) * 2 + h) * 32];
#pragma unroll
      for (int m = 0; m < kM; ++m)
#pragma unroll
        for (int t = 0; t < 2; ++t)
#pragma unroll
          for (int j = 0; j < kN8; ++j)
            mma_bf16(acc[m][j], word(av[m][0], 2 * t), word(av[m][1], 2 * t),
                     word(av[m][0], 2 * t + 1), word(av[m][1], 2 * t + 1), word(bv[j], 2 * t),
                     word(bv[j], 2 * t + 1));
    }
    stage = stage + 1 == kS ? 0 : stage + 1;
    if (++group < groups)
      continue;
    // The item's last k group: store (an item of no valid expert writes nothing).
    if (valid(expert_of(item))) {
      auto* c = static_cast<__nv_bfloat16*>(p.c);
      std::int64_t const row0 = item / col_items * kTile;
      std::int64_t const col0 = (item % col_items) * Policy::kWarpCols;
#pragma unroll
      for (int m = 0; m < kM; ++m)
#pragma unroll
        for (int j = 0; j < kN8; ++j) {
          std::int64_t const col = col0 + 8 * j + 2 * q;
          std::int64_t const r = row0 + 16 * m + g;
          *reinterpret_cast<__nv_bfloat162*>(c + r * p.ldc + col) =
              __floats2bfloat162_rn(acc[m][j][0], acc[m][j][1]);
          *reinterpret_cast<__nv_bfloat162*>(c + (r + 8) * p.ldc + col) =
              __floats2bfloat162_rn(acc[m][j][2], acc[m][j][3]);
        }
      if constexpr (kE == Epilogue::kFinalize) {
        static_assert(Policy::kWarpCols == finalize::fused::kSliceCols, "one counter per item");
        constexpr int kRows = kTile < 32 ? static_cast<int>(kTile) : 32;
#pragma unroll
        for (int r = 0; r < kTile; r += kRows)
          finalize::fused::finish_rows<kRows>(f, row0 + r, col0, lane);
      }
    }
    group = 0;
    item += stride;
  }
  cp_async_wait<0>();
  if constexpr (kE == Epilogue::kFinalize)
    finalize::fused::zero_unrouted(f, first, stride, lane);
  pdl_exit(k);
}

template <int kM>
__global__ void __launch_bounds__(Policy::kThreads)
    grouped_gemm_kernel(GroupedGemmParams p, PdlDevice k) {
  grouped_gemm_body<kM, Epilogue::kPlain>(p, k, finalize::fused::FusedParams{});
}

/// The layer's two GEMMs when finalize runs inside GEMM2 (kernels/finalize/fused_finalize.hpp):
/// GEMM1 clears the arrival counters, GEMM2 reduces in its epilogue. A kernel of its own, so
/// that the plain one (and its audited SASS) stays as it is.
template <int kM, Epilogue kE>
__global__ void __launch_bounds__(Policy::kThreads)
    grouped_gemm_fused_kernel(GroupedGemmParams p, PdlDevice k, finalize::fused::FusedParams f) {
  grouped_gemm_body<kM, kE>(p, k, f);
}

__global__ void fill_random_bf16_kernel(__nv_bfloat16* dst, std::int64_t n, std::uint64_t seed,
                                        float lo, float hi, float scale) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::uint64_t const u = mix64(seed ^ mix64(static_cast<std::uint64_t>(i)));
    float const mag = lo + (hi - lo) * static_cast<float>(u >> 40) * 0x1p-24f;
    dst[i] = __float2bfloat16_rn(((u & 1) ? -mag : mag) * scale);
  }
}

} // namespace moefin::gemm
