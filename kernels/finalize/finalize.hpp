#pragma once
// finalize::run — the public host call of the finalize operation (one dispatcher, several CUDA
// variants, docs/design/finalize.md; each variant is an entry of the registry in
// core/ops/finalize_variants.hpp). Host-visible header: no CUDA includes.

#include "core/ops/finalize_params.hpp"
#include "core/ops/finalize_variants.hpp"
#include "core/ops/pdl_knobs.hpp"

#include <cstdint>

namespace moefin::finalize {

/// The shape the dispatch rule looks at: sizes, and whether gemm_out and out are 16-byte
/// aligned (device buffers from cudaMalloc are), so that what a run will pick is known from the
/// shape alone.
struct ShapeQuery {
  std::int64_t hidden = 0, hidden_padded = 0, tokens = 0, top_k = 0;
  bool rows_aligned = true;
};

/// The seed's selection rule over the dispatchable moefin entries, by role: the forced variant
/// when o.variant is set; the FP8 one when asked; else scalar (kPrevious) when
/// ceil(H/256) * min(8192, T) < budget and not small_batch-eligible; small_batch when
/// ceil(H/256) * T < budget, the row is 128-bit aligned and 4 < K <= 64; vecload otherwise.
FinalizeVariant const& select(ShapeQuery const& q, Options const& o);
FinalizeVariant const& select(FinalizeParams const& p, Options const& o);

/// Validates the shape for the selected variant (InputError naming the field, the value and what
/// the variant supports) and computes its launch. Host only: needs no GPU.
LaunchPlan plan(FinalizeParams const& p, Options const& o);

/// Whether a lean instantiation serves the planned launch (LaunchPlan::lean): no delay, stamps
/// or snapshot, not Options::force_instrumented, and a placement the variant's lean kernels have
/// (each variant's own; small_batch also its late-trigger and metadata-after-wait placements;
/// small_batch_v2 entry or exit, its ablations at entry). Entries of other sources: never.
bool has_lean(FinalizeVariant const& v, LaunchPlan const& lp, Options const& o);

/// SMs x 8 of the current device.
int device_cta_budget();

/// Checks shapes (throws InputError naming what is unsupported), selects, launches on `stream`
/// with cudaLaunchKernelEx and checks the launch. Capturable in a CUDA graph. DeviceError in a
/// build without the variant's launch function (host-only builds).
void run(FinalizeParams const& p, Options const& o, Stream stream);

// Geometry of moefin's variants (finalize_select.cpp), for their registry entries.
LaunchPlan scalar_geometry(FinalizeParams const& p, Options const& o, FinalizeVariant const& v);
LaunchPlan vecload_geometry(FinalizeParams const& p, Options const& o, FinalizeVariant const& v);
LaunchPlan small_batch_geometry(FinalizeParams const& p, Options const& o,
                                FinalizeVariant const& v);
LaunchPlan small_batch_nosplit_geometry(FinalizeParams const& p, Options const& o,
                                        FinalizeVariant const& v);
LaunchPlan deepseek_geometry(FinalizeParams const& p, Options const& o, FinalizeVariant const& v);

} // namespace moefin::finalize

/// The launch function of a registry entry: the function in CUDA builds, null in host-only ones
/// (where the file holding the entry compiles as C++ and its kernels are left out).
#if defined(__CUDACC__)
#define MOEFIN_FINALIZE_LAUNCH(fn) (&(fn))
#else
#define MOEFIN_FINALIZE_LAUNCH(fn) (static_cast<::moefin::finalize::LaunchFn>(nullptr))
#endif
