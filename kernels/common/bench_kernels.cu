#include "kernels/common/bench_kernels.hpp"
#include "kernels/common/cuda_check.hpp"
#include "kernels/common/pdl.cuh"

#include "core/ops/errors.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

namespace moefin::bench {

namespace {

// A parameter, because cudaLaunchKernelEx builds an array of the kernel's arguments.
__global__ void empty_kernel(int) {}

// kWait: a PDL secondary that waits on its primary at entry, as GEMM2 does (every read and
// write after the wait; no explicit trigger: its dependents launch as its CTAs exit).
template <bool kWait>
__global__ void __launch_bounds__(256)
    copy_producer(uint4* __restrict__ dst, uint4 const* __restrict__ src, std::size_t n) {
  if constexpr (kWait)
    pdl_wait();
  std::size_t const stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    dst[i] = src[i];
}

__global__ void __launch_bounds__(256)
    read_stream(uint4 const* __restrict__ src, std::size_t n, unsigned* sink) {
  // Four coalesced loads in flight per thread, then a tail one by one.
  std::size_t const stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  unsigned acc = 0;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j)
      v[j] = __ldcs(src + i + j * stride);
#pragma unroll
    for (int j = 0; j < 4; ++j)
      acc ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
  }
  for (; i < n; i += stride) {
    uint4 const v = __ldcs(src + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u)
    *sink = acc;
}

} // namespace

void launch_read_stream(void const* src, std::size_t bytes, unsigned* sink, CUstream_st* stream) {
  if (bytes % 64 != 0 || reinterpret_cast<std::uintptr_t>(src) % 16 != 0)
    throw InputError("read stream: " + std::to_string(bytes) +
                     " bytes not a multiple of 64 or a pointer not 16-byte aligned");
  launch_kernel(read_stream, dim3(static_cast<unsigned>(device_sm_count() * 4)), dim3(256), 0,
                stream, /*pdl=*/false, static_cast<uint4 const*>(src), bytes / 16, sink);
}

void launch_empty(CUstream_st* stream, bool pdl) {
  launch_kernel(empty_kernel, dim3(1), dim3(32), 0, stream, pdl, 0);
}

void launch_copy_producer(void* dst, void const* src, std::size_t bytes, int max_ctas,
                          CUstream_st* stream, Producer how) {
  if (bytes % 16 != 0 || reinterpret_cast<std::uintptr_t>(dst) % 16 != 0 ||
      reinterpret_cast<std::uintptr_t>(src) % 16 != 0)
    throw InputError("copy producer: " + std::to_string(bytes) +
                     " bytes or a pointer not 16-byte aligned");
  if (bytes == 0)
    return;
  if (max_ctas < 1)
    throw InputError("copy producer: max_ctas " + std::to_string(max_ctas) + " < 1");
  std::size_t const n = bytes / 16;
  int const blocks =
      static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(max_ctas), (n + 255) / 256));
  bool const pdl = how == Producer::kPdlWait; // the waiting kernel exactly when PDL-launched
  launch_kernel(pdl ? copy_producer<true> : copy_producer<false>, dim3(blocks), dim3(256), 0,
                stream, pdl, static_cast<uint4*>(dst), static_cast<uint4 const*>(src), n);
}

} // namespace moefin::bench
