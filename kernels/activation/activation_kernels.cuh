#pragma once
// Activation kernel: a resident grid striding over the rows, 8 bf16 per thread and step, fp32 math,
// one rounding at the store.

#include "kernels/activation/activation.hpp"
#include "kernels/common/pdl_stage.cuh"

#include <cuda_bf16.h>

#include <cstdint>

namespace moefin::activation {

__device__ __forceinline__ float silu(float x) {
  return x / (1.0f + expf(-x));
}

template <Type kType> __device__ __forceinline__ float apply(float gate, float up) {
  if constexpr (kType == Type::kSwiGlu) {
    return silu(gate) * up;
  } else {
    float const r = fmaxf(gate, 0.0f);
    return r * r;
  }
}

template <Type kType> __global__ void activation_kernel(ActivationParams p, PdlDevice k) {
  pdl_enter(k);
  pdl_wait_point(k);
  std::int64_t const total = *p.total_padded_rows;
  std::int64_t const in_cols = kType == Type::kSwiGlu ? 2 * p.inter : p.inter;
  std::int64_t const vec = p.inter / 8;
  auto const* in = static_cast<__nv_bfloat16 const*>(p.in);
  auto* out = static_cast<__nv_bfloat16*>(p.out);
  std::int64_t const rows = std::min<std::int64_t>(total, p.max_rows);
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    for (std::int64_t c = threadIdx.x; c < vec; c += blockDim.x) {
      uint4 const g = *reinterpret_cast<uint4 const*>(in + row * in_cols + c * 8);
      uint4 u = g;
      if constexpr (kType == Type::kSwiGlu)
        u = *reinterpret_cast<uint4 const*>(in + row * in_cols + p.inter + c * 8);
      auto const* gh = reinterpret_cast<__nv_bfloat16 const*>(&g);
      auto const* uh = reinterpret_cast<__nv_bfloat16 const*>(&u);
      uint4 o;
      auto* oh = reinterpret_cast<__nv_bfloat16*>(&o);
#pragma unroll
      for (int j = 0; j < 8; ++j)
        oh[j] = __float2bfloat16_rn(apply<kType>(__bfloat162float(gh[j]), __bfloat162float(uh[j])));
      *reinterpret_cast<uint4*>(out + row * p.inter + c * 8) = o;
    }
  }
  pdl_exit(k);
}

} // namespace moefin::activation
