#pragma once
// Device buffers for the gpu-labelled chain tests: allocated poisoned (0xff bytes: NaN in bf16,
// -1 in int32), so that an element a kernel fails to write fails its comparison.

#include "kernels/common/cuda_check.hpp"

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace moefin::test {

class DeviceBuffer {
public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    MOEFIN_CUDA_CHECK(cudaMalloc(&ptr_, bytes ? bytes : 16));
    poison();
  }
  template <class T>
  explicit DeviceBuffer(std::vector<T> const& host) : DeviceBuffer(host.size() * sizeof(T)) {
    MOEFIN_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), bytes_, cudaMemcpyHostToDevice));
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(DeviceBuffer const&) = delete;
  DeviceBuffer& operator=(DeviceBuffer const&) = delete;

  void poison() { MOEFIN_CUDA_CHECK(cudaMemset(ptr_, 0xff, bytes_ ? bytes_ : 16)); }
  template <class T> T* as() const { return static_cast<T*>(ptr_); }
  void* get() const { return ptr_; }
  template <class T> std::vector<T> download() const {
    MOEFIN_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> h(bytes_ / sizeof(T));
    MOEFIN_CUDA_CHECK(cudaMemcpy(h.data(), ptr_, h.size() * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }

private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

} // namespace moefin::test
