#pragma once
// Device helpers of the grouped GEMMs: the bf16 tensor-core MMA, register word access and
// cp.async copies (commit and wait: kernels/common/cp_async.cuh).

#include "kernels/common/cp_async.cuh"

#include <cuda_runtime.h>

#include <cstdint>

namespace moefin::gemm {

/// d += A * B with A 16x16 (a0..a3), B 16x8 (b0, b1), bf16 inputs and fp32 accumulation, in the
/// fragment layout of the PTX ISA for mma.m16n8k16.
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

/// 16-byte asynchronous copy global -> shared that bypasses L1 and fetches the rest of the
/// source's 256-byte block into L2; with `read` false it writes zeros and reads nothing.
__device__ __forceinline__ void cp_async16(uint4* dst, void const* src, bool read) {
  auto const d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" ::"r"(d), "l"(src),
               "r"(read ? 16 : 0)
               : "memory");
}

/// An L2 policy for data read once: its lines are the first to be evicted, so a stream of
/// weights does not push out what the chain reads again (activations, routing's maps).
__device__ __forceinline__ std::uint64_t l2_evict_first() {
  std::uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

/// cp_async16 with an L2 cache policy (l2_evict_first).
__device__ __forceinline__ void cp_async16_hint(void* dst, void const* src, bool read,
                                                std::uint64_t policy) {
  auto const d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global.L2::cache_hint.L2::256B [%0], [%1], 16, %2, %3;" ::"r"(d),
               "l"(src), "r"(read ? 16 : 0), "l"(policy)
               : "memory");
}

/// 4-byte asynchronous copy (cp.async.cg takes 16 bytes only; .ca goes through L1, which is
/// why only the small fp4 scales use it), with an L2 cache policy.
__device__ __forceinline__ void cp_async4_hint(void* dst, void const* src, bool read,
                                               std::uint64_t policy) {
  auto const d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global.L2::cache_hint [%0], [%1], 4, %2, %3;" ::"r"(d), "l"(src),
               "r"(read ? 4 : 0), "l"(policy)
               : "memory");
}

} // namespace moefin::gemm
