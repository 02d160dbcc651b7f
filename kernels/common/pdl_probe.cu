#include "kernels/common/pdl.cuh"
#include "kernels/common/pdl_probe.hpp"

#include <vector>

namespace moefin::probe {

namespace {

__global__ void probe_producer(int* flag, int value, bool trigger_at_end, std::int64_t delay_ns) {
  if (!trigger_at_end)
    pdl_trigger();
  pdl_wait();
  spin_ns(delay_ns);
  *reinterpret_cast<int volatile*>(flag) = value;
  if (trigger_at_end) {
    __syncthreads();
    pdl_trigger();
  }
}

__global__ void probe_middle(bool trigger_before_wait) {
  if (trigger_before_wait)
    pdl_trigger();
  pdl_wait();
  if (!trigger_before_wait)
    pdl_trigger();
}

__global__ void probe_consumer(int const* flag, int* pre, int* post, int it) {
  int const before = *reinterpret_cast<int const volatile*>(flag);
  pdl_wait();
  int const after = *reinterpret_cast<int const volatile*>(flag);
  if (threadIdx.x == 0) {
    pre[it] = before;
    post[it] = after;
  }
}

void enqueue(ProbeChain const& c, int* flag, int* pre, int* post, int it, std::int64_t delay_ns,
             cudaStream_t s) {
  launch_kernel(probe_producer, dim3(1), dim3(32), 0, s, true, flag, it, c.producer_triggers_at_end,
                delay_ns);
  for (bool before : c.middle_triggers_before_wait)
    launch_kernel(probe_middle, dim3(1), dim3(32), 0, s, true, before);
  launch_kernel(probe_consumer, dim3(1), dim3(32), 0, s, true, static_cast<int const*>(flag), pre,
                post, it);
}

} // namespace

ProbeResult run_probe(ProbeChain const& c, bool graph, int iterations, std::int64_t delay_ns) {
  int *flag = nullptr, *pre = nullptr, *post = nullptr;
  MOEFIN_CUDA_CHECK(cudaMalloc(&flag, sizeof(int)));
  MOEFIN_CUDA_CHECK(cudaMalloc(&pre, iterations * sizeof(int)));
  MOEFIN_CUDA_CHECK(cudaMalloc(&post, iterations * sizeof(int)));
  cudaStream_t s;
  MOEFIN_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  MOEFIN_CUDA_CHECK(cudaMemsetAsync(flag, 0xff, sizeof(int), s)); // -1: no iteration wrote it
  MOEFIN_CUDA_CHECK(cudaMemsetAsync(pre, 0xfe, iterations * sizeof(int), s));
  MOEFIN_CUDA_CHECK(cudaMemsetAsync(post, 0xfe, iterations * sizeof(int), s));
  MOEFIN_CUDA_CHECK(cudaStreamSynchronize(s));
  if (graph) {
    cudaGraph_t g = nullptr;
    cudaGraphExec_t exec = nullptr;
    MOEFIN_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    for (int it = 0; it < iterations; ++it)
      enqueue(c, flag, pre, post, it, delay_ns, s);
    MOEFIN_CUDA_CHECK(cudaStreamEndCapture(s, &g));
    MOEFIN_CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
    MOEFIN_CUDA_CHECK(cudaGraphLaunch(exec, s));
    MOEFIN_CUDA_CHECK(cudaStreamSynchronize(s));
    MOEFIN_CUDA_CHECK(cudaGraphExecDestroy(exec));
    MOEFIN_CUDA_CHECK(cudaGraphDestroy(g));
  } else {
    for (int it = 0; it < iterations; ++it)
      enqueue(c, flag, pre, post, it, delay_ns, s);
    MOEFIN_CUDA_CHECK(cudaStreamSynchronize(s));
  }
  std::vector<int> h_pre(iterations), h_post(iterations);
  MOEFIN_CUDA_CHECK(
      cudaMemcpy(h_pre.data(), pre, iterations * sizeof(int), cudaMemcpyDeviceToHost));
  MOEFIN_CUDA_CHECK(
      cudaMemcpy(h_post.data(), post, iterations * sizeof(int), cudaMemcpyDeviceToHost));
  MOEFIN_CUDA_CHECK(cudaStreamDestroy(s));
  MOEFIN_CUDA_CHECK(cudaFree(flag));
  MOEFIN_CUDA_CHECK(cudaFree(pre));
  MOEFIN_CUDA_CHECK(cudaFree(post));
  ProbeResult r;
  r.iterations = iterations;
  for (int it = 0; it < iterations; ++it) {
    r.stale_pre_wait += h_pre[it] != it;
    r.stale_post_wait += h_post[it] != it;
  }
  return r;
}

} // namespace moefin::probe
