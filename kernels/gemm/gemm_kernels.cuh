#pragma once
// Grouped GEMM kernel (mma.sync m16n8k16, bf16 in, fp32 accumulation).
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

/// kM m16 tiles per CTA (tile_m = 16 kM).
template <int kM>
__global__ void __launch_bounds__(Policy::kThreads)
    grouped_gemm_kernel(GroupedGemmParams p, PdlDevice k) {
  pdl_enter(k);
  pdl_wait_point(k);
  int const lane = threadIdx.x & 31;
  int const warp = threadIdx.x >> 5;
  int const g = lane >> 2, q = lane & 3;
  std::int64_t const total = std::min<std::int64_t>(*p.total_padded_rows, p.max_rows);
  std::int64_t const col_tiles = p.n / Policy::kTileN;
  std::int64_t const work = col_tiles * (total / (16 * kM));
  // Persistent: the grid is one resident wave (see resident_grid); CTAs stride over the work
  // items of the rows routing actually produced, column tiles of one row tile adjacent.
  for (std::int64_t w = blockIdx.x; w < work; w += gridDim.x) {
    std::int64_t const row_tile = w / col_tiles;
    std::int64_t const row0 = row_tile * (16 * kM);
    std::int32_t const expert = p.cta_to_expert[row_tile];
    if (expert < 0 || expert >= p.num_local_experts)
      continue;
    std::int64_t const col0 = (w % col_tiles) * Policy::kTileN + warp * 16;
    auto const* a = static_cast<__nv_bfloat16 const*>(p.a);
    auto const* b = static_cast<__nv_bfloat16 const*>(p.b) + expert * p.n * p.k;
    __nv_bfloat16 const* b_row[2] = {b + (col0 + g) * p.k + 8 * q,
                                     b + (col0 + 8 + g) * p.k + 8 * q};
    __nv_bfloat16 const* a_row[kM][2];
#pragma unroll
    for (int m = 0; m < kM; ++m) {
      a_row[m][0] = a + (row0 + 16 * m + g) * p.k + 8 * q;
      a_row[m][1] = a + (row0 + 16 * m + 8 + g) * p.k + 8 * q;
    }
    float acc[kM][2][4] = {};
#pragma unroll 4
    for (std::int64_t kk = 0; kk < p.k; kk += Policy::kStepK) {
      uint4 bv[2];
#pragma unroll
      for (int j = 0; j < 2; ++j)
        bv[j] = __ldg(reinterpret_cast<uint4 const*>(b_row[j] + kk));
#pragma unroll
      for (int m = 0; m < kM; ++m) {
        uint4 const lo = *reinterpret_cast<uint4 const*>(a_row[m][0] + kk);
        uint4 const hi = *reinterpret_cast<uint4 const*>(a_row[m][1] + kk);
#pragma unroll
        for (int s = 0; s < 2; ++s)
#pragma unroll
          for (int j = 0; j < 2; ++j)
            mma_bf16(acc[m][j], word(lo, 2 * s), word(hi, 2 * s), word(lo, 2 * s + 1),
                     word(hi, 2 * s + 1), word(bv[j], 2 * s), word(bv[j], 2 * s + 1));
      }
    }
    auto* c = static_cast<__nv_bfloat16*>(p.c);
#pragma unroll
    for (int m = 0; m < kM; ++m)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
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
