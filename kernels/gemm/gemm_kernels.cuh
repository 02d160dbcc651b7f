#pragma once
// Grouped GEMM kernel (mma.sync m16n8k16, bf16 in, fp32 accumulation), one work item per warp.
//
// The k dimension of one 32-wide step is permuted identically for A and B, which leaves the sum
// unchanged and lets each thread load its operands with single 128-bit loads: thread (g, q) of
// a warp (g = lane / 4, q = lane % 4) loads k = 8q .. 8q+7 of A rows g and g+8 and of B row g,
// and feeds words 2s, 2s+1 of them to mma step s (s = 0, 1) in the fragment positions that the
// PTX ISA assigns to logical k = 2q, 2q+1 and 2q+8, 2q+9.

#include "core/router_scores.hpp"
#include "kernels/common/pdl_stage.cuh"
#include "kernels/gemm/gemm.hpp"

#include <cuda_bf16.h>

#include <cstdint>

namespace moefin::gemm {

__device__ __forceinline__ void mma_bf16(float (&d)[4], std::uint32_t a0, std::uint32_t a1,
                                         std::uint32_t a2, std::uint32_t a3, std::uint32_t b0,
                                         std::uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ std::uint32_t word(uint4 const& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

/// A weight row's 16 bytes: read-only for the kernel, streamed once, so they skip L1 (which
/// keeps the activation rows the warps of a CTA share) and fetch the row's next 256 bytes into L2.
__device__ __forceinline__ uint4 load_weights(__nv_bfloat16 const* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

/// kG k steps of one warp item: every load first (weights, then the activation rows that are
/// not padding), then the MMAs in ascending k, so the sum order does not depend on kG.
template <int kM, int kN8, int kG>
__device__ __forceinline__ void mma_steps(float (&acc)[kM][kN8][4],
                                          __nv_bfloat16 const* const (&a_row)[kM][2],
                                          bool const (&a_on)[kM][2], __nv_bfloat16 const* b_row,
                                          std::int64_t ldb, std::int64_t kk) {
  uint4 bv[kG][kN8];
  uint4 av[kG][kM][2];
#pragma unroll
  for (int s = 0; s < kG; ++s)
#pragma unroll
    for (int j = 0; j < kN8; ++j)
      bv[s][j] = load_weights(b_row + 8 * j * ldb + kk + Policy::kStepK * s);
#pragma unroll
  for (int s = 0; s < kG; ++s)
#pragma unroll
    for (int m = 0; m < kM; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        av[s][m][h] = a_on[m][h]
                          ? *reinterpret_cast<uint4 const*>(a_row[m][h] + kk + Policy::kStepK * s)
                          : make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int s = 0; s < kG; ++s)
#pragma unroll
    for (int m = 0; m < kM; ++m)
#pragma unroll
      for (int t = 0; t < 2; ++t)
#pragma unroll
        for (int j = 0; j < kN8; ++j)
          mma_bf16(acc[m][j], word(av[s][m][0], 2 * t), word(av[s][m][1], 2 * t),
                   word(av[s][m][0], 2 * t + 1), word(av[s][m][1], 2 * t + 1),
                   word(bv[s][j], 2 * t), word(bv[s][j], 2 * t + 1));
}

/// kM m16 tiles per row tile (tile_m = 16 kM). Each warp owns (row tile, warp_cols columns)
/// items: kN8 n8 tiles, B rows col0 + 8 j + g.
template <int kM>
__global__ void __launch_bounds__(Policy::kThreads, kM <= 2 ? 4 : 1)
    grouped_gemm_kernel(GroupedGemmParams p, PdlDevice k) {
  constexpr int kN8 = Policy::warp_cols(16 * kM) / 8;
  constexpr int kG = Policy::group_steps(16 * kM);
  constexpr int kWarps = Policy::kThreads / 32;
  pdl_enter(k);
  pdl_wait_point(k);
  int const lane = threadIdx.x & 31;
  int const g = lane >> 2, q = lane & 3;
  std::int64_t const total = std::min<std::int64_t>(*p.total_padded_rows, p.max_rows);
  std::int64_t const col_items = p.n / (8 * kN8);
  std::int64_t const work = col_items * (total / (16 * kM));
  auto const* a = static_cast<__nv_bfloat16 const*>(p.a);
  // Persistent: the grid is one resident wave (see resident_grid); the warps of a CTA take
  // adjacent column slices of one row tile, so its activation rows are read once into L1.
  for (std::int64_t w = blockIdx.x * static_cast<std::int64_t>(kWarps) + (threadIdx.x >> 5);
       w < work; w += static_cast<std::int64_t>(gridDim.x) * kWarps) {
    std::int64_t const row_tile = w / col_items;
    std::int64_t const row0 = row_tile * (16 * kM);
    std::int32_t const expert = p.cta_to_expert[row_tile];
    if (expert < 0 || expert >= p.num_local_experts)
      continue;
    std::int64_t const col0 = (w % col_items) * (8 * kN8);
    __nv_bfloat16 const* const b_row =
        static_cast<__nv_bfloat16 const*>(p.b) + (expert * p.n + col0 + g) * p.k + 8 * q;
    __nv_bfloat16 const* a_row[kM][2];
    bool a_on[kM][2];
#pragma unroll
    for (int m = 0; m < kM; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        std::int64_t const r = row0 + 16 * m + 8 * h + g;
        a_row[m][h] = a + r * p.k + 8 * q;
        a_on[m][h] = p.row_token == nullptr || p.row_token[r] >= 0;
      }
    float acc[kM][kN8][4] = {};
    std::int64_t kk = 0;
    for (; kk + kG * Policy::kStepK <= p.k; kk += kG * Policy::kStepK)
      mma_steps<kM, kN8, kG>(acc, a_row, a_on, b_row, p.k, kk);
    for (; kk < p.k; kk += Policy::kStepK)
      mma_steps<kM, kN8, 1>(acc, a_row, a_on, b_row, p.k, kk);
    auto* c = static_cast<__nv_bfloat16*>(p.c);
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
  }
  pdl_exit(k);
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
