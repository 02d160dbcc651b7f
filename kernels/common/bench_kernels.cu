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

__global__ void __launch_bounds__(256)
    copy_producer(uint4* __restrict__ dst, uint4 const* __restrict__ src, std::size_t n) {
  std::size_t const stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    dst[i] = src[i];
}

} // namespace

void launch_empty(CUstream_st* stream, bool pdl) {
  launch_kernel(empty_kernel, dim3(1), dim3(32), 0, stream, pdl, 0);
}

void launch_copy_producer(void* dst, void const* src, std::size_t bytes, int max_ctas,
                          CUstream_st* stream) {
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
  launch_kernel(copy_producer, dim3(blocks), dim3(256), 0, stream, /*pdl=*/false,
                static_cast<uint4*>(dst), static_cast<uint4 const*>(src), n);
}

} // namespace moefin::bench
