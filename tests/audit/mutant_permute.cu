// moefin's permute kernel (kernels/permute/permute_kernels.cuh) edited to trigger its
// dependents before its grid-dependency wait, whatever its knob says: the change the audit must
// report, and that must turn the chain in which permute is the only link into a race. The edit
// is made by the preprocessor, so that the mutant is the kernel's own code plus the edit.

#include "kernels/common/pdl_stage.cuh"

namespace moefin {

/// The kernel's entry step, with the trigger first.
__device__ __forceinline__ void pdl_enter_triggering_first(PdlDevice const& k) {
  pdl_trigger(); // the edit
  pdl_enter(k);
}

} // namespace moefin

#define pdl_enter(k) pdl_enter_triggering_first(k)
#define permute_kernel permute_kernel_mutant
#include "kernels/permute/permute_kernels.cuh"
