#pragma once
// Programmatic Dependent Launch: the device-side wait and trigger, and a launcher that sets the
// programmatic-stream-serialization attribute. docs/design/pdl.md has the semantics.

#include "kernels/common/cuda_check.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace moefin {

/// Returns once the primary grid has completed and its memory is visible (griddepcontrol.wait).
/// A no-op when the kernel was not launched as a PDL secondary. Compiled out below sm_90, which
/// is why every target of this project is sm_90 or newer (see CMakeLists.txt).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// Allows the dependent grid to launch once every CTA of this grid has triggered or exited.
/// Orders execution only: it publishes no memory (griddepcontrol.launch_dependents).
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// Nanosecond global timer (coarse, but common to all SMs).
__device__ __forceinline__ std::uint64_t global_timer_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// Spins for at least `ns` nanoseconds (delay injection before a kernel's writes).
__device__ __forceinline__ void spin_ns(std::int64_t ns) {
  if (ns <= 0)
    return;
  std::uint64_t const start = global_timer_ns();
  while (global_timer_ns() - start < static_cast<std::uint64_t>(ns)) {
  }
}

/// Multiprocessors of the current device (queried once per device).
inline int device_sm_count() {
  int dev = 0;
  MOEFIN_CUDA_CHECK(cudaGetDevice(&dev));
  static int cached_dev = -1, cached = 0;
  if (dev != cached_dev) {
    MOEFIN_CUDA_CHECK(cudaDeviceGetAttribute(&cached, cudaDevAttrMultiProcessorCount, dev));
    cached_dev = dev;
  }
  return cached;
}

/// A grid whose CTAs are all resident at once (at most `per_sm` per multiprocessor), for kernels
/// that loop over their work. A trigger takes effect once *every* CTA of the grid has executed
/// it; a grid larger than one wave whose first CTAs block in the grid-dependency wait cannot
/// trigger before its primary completes, whatever the placement says.
inline unsigned resident_grid(std::int64_t work, int per_sm) {
  std::int64_t const cap = static_cast<std::int64_t>(device_sm_count()) * per_sm;
  return static_cast<unsigned>(std::max<std::int64_t>(1, std::min(work, cap)));
}

/// Shared-memory settings of `kernel`, before its launches: the largest shared-memory carveout or,
/// with `max_shared` false, the driver's default choice; and the dynamic shared memory it may take
/// (`dynamic_bytes` above 48 KiB needs this opt-in). An SM changes its L1/shared split only when it
/// is empty, so a kernel that needs shared memory cannot start on an SM still holding CTAs of a
/// kernel that runs with a smaller carveout (docs/design/layer-chain.md, "PDL knobs and
/// residency").
template <class... KArgs>
void set_shared_memory(void (*kernel)(KArgs...), bool max_shared, std::size_t dynamic_bytes = 0) {
  MOEFIN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                         max_shared ? cudaSharedmemCarveoutMaxShared
                                                    : cudaSharedmemCarveoutDefault));
  if (dynamic_bytes > 0)
    MOEFIN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(dynamic_bytes)));
}

/// Launches `kernel` with cudaLaunchKernelEx, PDL attribute on or off, and checks the launch.
template <class... KArgs, class... Args>
void launch_kernel(void (*kernel)(KArgs...), dim3 grid, dim3 block, std::size_t smem,
                   cudaStream_t stream, bool pdl, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = pdl ? 1 : 0;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  MOEFIN_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
  MOEFIN_CUDA_CHECK_LAUNCH();
}

} // namespace moefin
