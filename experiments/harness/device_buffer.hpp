#pragma once
// RAII device memory, streams, events and CUDA graphs for the experiment runners (CUDA builds
// only). Every call is checked; a failure is a DeviceError naming the call.

#include "kernels/common/cuda_check.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

namespace moefin::dev {

class Buffer {
public:
  Buffer() = default;
  explicit Buffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes)
      MOEFIN_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
  }
  ~Buffer() {
    if (ptr_)
      cudaFree(ptr_); // no throw from a destructor; a failure here surfaces at the next call
  }
  Buffer(Buffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  Buffer(Buffer const&) = delete;
  Buffer& operator=(Buffer const&) = delete;

  template <class T = void> T* get() const { return static_cast<T*>(ptr_); }
  std::size_t bytes() const { return bytes_; }

  /// Allocates (when the size differs) and copies `bytes` from host memory. Synchronizes the
  /// device: a pageable copy may still be in flight when cudaMemcpy returns, and the experiments'
  /// streams do not synchronize with the legacy stream.
  void upload(void const* src, std::size_t bytes) {
    if (bytes != bytes_)
      *this = Buffer(bytes);
    if (bytes) {
      MOEFIN_CUDA_CHECK(cudaMemcpy(ptr_, src, bytes, cudaMemcpyHostToDevice));
      MOEFIN_CUDA_CHECK(cudaDeviceSynchronize());
    }
  }
  template <class T> void upload(std::vector<T> const& v) {
    upload(v.data(), v.size() * sizeof(T));
  }

  /// A device copy of `other` (complete when this returns).
  static Buffer copy_of(Buffer const& other) {
    Buffer b(other.bytes_);
    if (other.bytes_) {
      MOEFIN_CUDA_CHECK(cudaMemcpy(b.ptr_, other.ptr_, other.bytes_, cudaMemcpyDeviceToDevice));
      MOEFIN_CUDA_CHECK(cudaDeviceSynchronize());
    }
    return b;
  }

  template <class T> std::vector<T> download(cudaStream_t s = nullptr) const {
    std::vector<T> out(bytes_ / sizeof(T));
    if (bytes_) {
      MOEFIN_CUDA_CHECK(cudaMemcpyAsync(out.data(), ptr_, bytes_, cudaMemcpyDeviceToHost, s));
      MOEFIN_CUDA_CHECK(cudaStreamSynchronize(s));
    }
    return out;
  }

  /// Fills every byte with `value` (0xff: NaN in bf16, fp32 and E4M3 alike), ordered on `s`.
  void fill(int value, cudaStream_t s) const {
    if (bytes_)
      MOEFIN_CUDA_CHECK(cudaMemsetAsync(ptr_, value, bytes_, s));
  }

private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

class Stream {
public:
  Stream() { MOEFIN_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(s_); }
  Stream(Stream const&) = delete;
  Stream& operator=(Stream const&) = delete;
  cudaStream_t get() const { return s_; }
  void sync() const { MOEFIN_CUDA_CHECK(cudaStreamSynchronize(s_)); }

private:
  cudaStream_t s_ = nullptr;
};

class Event {
public:
  Event() { MOEFIN_CUDA_CHECK(cudaEventCreate(&e_)); }
  ~Event() { cudaEventDestroy(e_); }
  Event(Event const&) = delete;
  Event& operator=(Event const&) = delete;
  cudaEvent_t get() const { return e_; }

private:
  cudaEvent_t e_ = nullptr;
};

/// An instantiated CUDA graph captured from the work `body` enqueues on a stream.
class Graph {
public:
  Graph() = default;
  Graph(cudaStream_t s, std::function<void()> const& body) {
    MOEFIN_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    try {
      body();
    } catch (...) {
      cudaGraph_t g = nullptr;
      cudaStreamEndCapture(s, &g); // leave the stream usable before reporting the first error
      if (g)
        cudaGraphDestroy(g);
      throw;
    }
    cudaGraph_t g = nullptr;
    MOEFIN_CUDA_CHECK(cudaStreamEndCapture(s, &g));
    cudaError_t const err = cudaGraphInstantiate(&exec_, g, 0);
    cudaGraphDestroy(g);
    MOEFIN_CUDA_CHECK(err);
    MOEFIN_CUDA_CHECK(cudaGraphUpload(exec_, s));
  }
  ~Graph() {
    if (exec_)
      cudaGraphExecDestroy(exec_);
  }
  Graph(Graph&& o) noexcept : exec_(std::exchange(o.exec_, nullptr)) {}
  Graph& operator=(Graph&& o) noexcept {
    std::swap(exec_, o.exec_);
    return *this;
  }
  Graph(Graph const&) = delete;
  Graph& operator=(Graph const&) = delete;

  void launch(cudaStream_t s) const { MOEFIN_CUDA_CHECK(cudaGraphLaunch(exec_, s)); }

  /// Milliseconds of one replay, between events recorded around it on `s`.
  float time_ms(cudaStream_t s, Event const& start, Event const& stop) const {
    MOEFIN_CUDA_CHECK(cudaEventRecord(start.get(), s));
    launch(s);
    MOEFIN_CUDA_CHECK(cudaEventRecord(stop.get(), s));
    MOEFIN_CUDA_CHECK(cudaEventSynchronize(stop.get()));
    float ms = 0;
    MOEFIN_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    return ms;
  }

private:
  cudaGraphExec_t exec_ = nullptr;
};

} // namespace moefin::dev
