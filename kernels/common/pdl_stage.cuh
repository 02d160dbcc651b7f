#pragma once
// The PDL knobs inside a kernel of the chain: where it triggers its dependents, the injected
// delay, and the per-CTA %globaltimer stamps. Every chain kernel has the same skeleton
//   pdl_enter(k);  [reads of nothing produced upstream]
//   pdl_wait_point(k);  [every upstream-dependent read, computation, writes]
//   pdl_exit(k);
// and every thread of every CTA passes all three, CTAs without work included: a CTA that exited
// before its wait would trigger its dependents (implicitly) before its primary completed.

#include "core/ops/pdl_knobs.hpp"
#include "kernels/common/pdl.cuh"

#include <cstdint>

namespace moefin {

/// The knobs as a kernel argument: Trigger::kDefault already resolved by the launcher.
struct PdlDevice {
  std::int32_t trigger = static_cast<std::int32_t>(Trigger::kExit);
  std::int64_t delay_ns = 0;
  std::int64_t* stamps = nullptr; // [grid CTAs][4]: start, wait returned, trigger, end
};

inline PdlDevice pdl_device(PdlKnobs const& k, Trigger resolved_default) {
  PdlDevice d;
  d.trigger = static_cast<std::int32_t>(resolve(k.trigger, resolved_default));
  d.delay_ns = k.delay_ns;
  d.stamps = k.stamps;
  return d;
}

enum StampSlot : int { kStampStart = 0, kStampWait = 1, kStampTrigger = 2, kStampEnd = 3 };

__device__ __forceinline__ std::int64_t linear_cta() {
  return blockIdx.x + static_cast<std::int64_t>(gridDim.x) *
                          (blockIdx.y + static_cast<std::int64_t>(gridDim.y) * blockIdx.z);
}

__device__ __forceinline__ bool first_thread() {
  return threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0;
}

__device__ __forceinline__ void pdl_stamp(PdlDevice const& k, int slot) {
  if (k.stamps != nullptr && first_thread())
    k.stamps[linear_cta() * 4 + slot] = static_cast<std::int64_t>(global_timer_ns());
}

__device__ __forceinline__ void pdl_fire(PdlDevice const& k) {
  pdl_trigger();
  pdl_stamp(k, kStampTrigger);
}

__device__ __forceinline__ void pdl_enter(PdlDevice const& k) {
  pdl_stamp(k, kStampStart);
  if (k.trigger == static_cast<std::int32_t>(Trigger::kEntry))
    pdl_fire(k);
}

/// The grid-dependency wait, then the after-wait trigger and the injected delay (before any
/// global write of the kernel).
__device__ __forceinline__ void pdl_wait_point(PdlDevice const& k) {
  pdl_wait();
  pdl_stamp(k, kStampWait);
  if (k.trigger == static_cast<std::int32_t>(Trigger::kAfterWait))
    pdl_fire(k);
  spin_ns(k.delay_ns);
}

/// After the CTA's last write: the after-writes trigger (once every thread of the CTA is done)
/// and the end stamp.
__device__ __forceinline__ void pdl_exit(PdlDevice const& k) {
  if (k.trigger == static_cast<std::int32_t>(Trigger::kAfterWrites) || k.stamps != nullptr)
    __syncthreads();
  if (k.trigger == static_cast<std::int32_t>(Trigger::kAfterWrites))
    pdl_fire(k);
  pdl_stamp(k, kStampEnd);
}

} // namespace moefin
