// A TMA load through a __grid_constant__ tensor-map parameter: ptxas addresses the descriptor
// from the parameter block's generic address (c[0x0][0x198] on sm_90, c[0x0][0x348] on sm_100),
// which is how the audit names the descriptor a TMA instruction uses.

#include <cuda.h>

#include <cstdint>

extern "C" __global__ void tma_load(const __grid_constant__ CUtensorMap map, int* out) {
  __shared__ alignas(128) int tile[256];
  __shared__ std::uint64_t bar;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  auto const s = static_cast<std::uint32_t>(__cvta_generic_to_shared(tile));
  auto const b = static_cast<std::uint32_t>(__cvta_generic_to_shared(&bar));
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3}], [%4];" ::"r"(s),
               "l"(&map), "r"(0), "r"(0), "r"(b)
               : "memory");
#endif
  out[threadIdx.x] = tile[threadIdx.x];
}
