#include "kernels/common/pdl.cuh"
#include "kernels/common/smoke.hpp"

#include <cstdint>
#include <vector>

namespace moefin {

namespace {

__global__ void smoke_producer(std::uint32_t* buf, int n, std::uint32_t salt) {
  pdl_wait();
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    buf[i] = static_cast<std::uint32_t>(i) * 2654435761u + salt;
}

__global__ void smoke_consumer(std::uint32_t const* in, std::uint32_t* out, int n) {
  pdl_trigger();
  pdl_wait(); // the producer's writes are visible only after this
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = in[i] ^ 0xa5a5a5a5u;
}

} // namespace

bool run_device_smoke(std::string* detail) {
  int const n = 1 << 20;
  std::uint32_t const salt = 0x1234567u;
  std::uint32_t *d_a = nullptr, *d_b = nullptr;
  MOEFIN_CUDA_CHECK(cudaMalloc(&d_a, n * sizeof(std::uint32_t)));
  MOEFIN_CUDA_CHECK(cudaMalloc(&d_b, n * sizeof(std::uint32_t)));
  cudaStream_t stream;
  MOEFIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  MOEFIN_CUDA_CHECK(cudaMemsetAsync(d_a, 0xff, n * sizeof(std::uint32_t), stream));
  MOEFIN_CUDA_CHECK(cudaMemsetAsync(d_b, 0xff, n * sizeof(std::uint32_t), stream));
  int const threads = 256;
  int const blocks = (n + threads - 1) / threads;
  launch_kernel(smoke_producer, dim3(blocks), dim3(threads), 0, stream, true, d_a, n, salt);
  launch_kernel(smoke_consumer, dim3(blocks), dim3(threads), 0, stream, true,
                static_cast<std::uint32_t const*>(d_a), d_b, n);
  std::vector<std::uint32_t> h(n);
  MOEFIN_CUDA_CHECK(
      cudaMemcpyAsync(h.data(), d_b, n * sizeof(std::uint32_t), cudaMemcpyDeviceToHost, stream));
  MOEFIN_CUDA_CHECK(cudaStreamSynchronize(stream));
  MOEFIN_CUDA_CHECK(cudaStreamDestroy(stream));
  MOEFIN_CUDA_CHECK(cudaFree(d_a));
  MOEFIN_CUDA_CHECK(cudaFree(d_b));
  for (int i = 0; i < n; ++i) {
    std::uint32_t const want = (static_cast<std::uint32_t>(i) * 2654435761u + salt) ^ 0xa5a5a5a5u;
    if (h[i] != want) {
      if (detail)
        *detail = "element " + std::to_string(i) + " is " + std::to_string(h[i]) + ", expected " +
                  std::to_string(want);
      return false;
    }
  }
  if (detail)
    *detail = std::to_string(n) + " elements written through a PDL producer/consumer pair";
  return true;
}

} // namespace moefin
