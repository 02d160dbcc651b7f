// The registry entry of the finalize inside GEMM2 (fused_finalize.hpp): a variant without a
// kernel of its own, so that the layer chain picks it like any other (--set
// finalize.variant=fused, sweep layer's finalize axis) and its plan (core/ops/layer_plan.hpp)
// moves the reduction into GEMM2. Host only.

#include "kernels/finalize/fused_finalize.hpp"
#include "kernels/finalize/finalize.hpp"

#include "core/ops/errors.hpp"

namespace moefin::finalize {

namespace {

LaunchPlan fused_geometry(FinalizeParams const&, Options const&, FinalizeVariant const& v) {
  throw InputError("finalize: variant " + v.name +
                   " runs inside GEMM2 (gemm::run_fused), in the layer chain only "
                   "(--set finalize.variant=" +
                   v.name + "); it has no launch of its own");
}

Registrar const kFused(variant_entry("fused")
                           .as(Role::kSmallBatch)
                           .against("scalar")
                           .triggers(Trigger::kExit)
                           .vectorized(fused::kMaxTopK)
                           .fused_into_gemm2()
                           .listed(kListChain, 190)
                           .noted("no finalize launch: GEMM2 reduces in its epilogue after a "
                                  "per-token arrival count, ascending k (bitwise the scalar "
                                  "finalize)")
                           .runs(fused_geometry, nullptr));

} // namespace

} // namespace moefin::finalize
