#pragma once
// Asynchronous global -> shared copies (cp.async, sm_80+) shared by the kernels that stage
// operands in shared memory: the GEMMs (kernels/gemm/mma.cuh adds their 16-byte and hinted
// copies) and the decode routing.

#include <cuda_runtime.h>

namespace moefin {

/// 4-byte copy global -> shared (cp.async.cg takes 16 bytes only; .ca goes through L1).
__device__ __forceinline__ void cp_async4(void* dst, void const* src) {
  auto const d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(d), "l"(src) : "memory");
}

/// Closes this thread's current group of copies.
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}

/// Waits until at most kPending of this thread's committed copy groups are still in flight.
template <int kPending> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

} // namespace moefin
