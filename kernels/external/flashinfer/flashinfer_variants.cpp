// The released finalize kernels as entries of moefin's finalize variant registry
// (core/ops/finalize_variants.hpp), so that `moefin check finalize` and `moefin sweep finalize`
// run them beside moefin's in the same rounds. Compiled only into builds that contain the
// released kernels (kernels/external/flashinfer/CMakeLists.txt): elsewhere the entries do not
// exist and the default lists are moefin's alone.
//
// Each entry launches one released kernel with the released geometry through the adapter
// (flashinfer::run); ratios are computed against the released previous kernel (fi_scalar), so
// fi_small_batch / fi_scalar is the released change's speedup and small_batch / fi_small_batch
// the faithfulness of moefin's kernel of the same role. The PDL fields are what the released
// code does (trtllm_fused_moe_dev_kernel.cu): finalizeKernel and finalizeDeepSeekKernel wait at
// entry and never trigger, finalizeKernelVecLoad reads indices and weights before its wait and
// never triggers, finalizeKernelSmallBatch triggers at entry and reads them before its wait.
// The released kernels have none of moefin's run-time knobs (trigger placement, pre-wait
// metadata switch, delay, stamps, snapshot, slice width): asking for one is an InputError.
//
// finalizeDeepSeekKernel has no entry: it writes bf16 values divided by the scale, with the
// scales column-major (flashinfer.hpp), where every fp8 consumer here (check finalize's
// verifier, the chain) reads E4M3 and row-major scales; tests/test_flashinfer_gpu.cpp checks it.

#include "kernels/external/flashinfer/flashinfer.hpp"

#include "core/ops/errors.hpp"
#include "core/ops/finalize_variants.hpp"

#include <string>

namespace moefin::external::flashinfer {

namespace {

using finalize::FinalizeVariant;
using finalize::Registrar;
using finalize::Role;
using finalize::Source;
using finalize::variant_entry;

void refuse_knobs(finalize::Options const& o, FinalizeVariant const& v) {
  auto refuse = [&](char const* what) {
    throw InputError("finalize: " + v.name + " (released) " + what);
  };
  if (o.pdl.trigger != Trigger::kDefault && o.pdl.trigger != v.default_trigger)
    refuse((std::string("triggers where the released code does (") +
            trigger_name(v.default_trigger) + "), not at " + trigger_name(o.pdl.trigger))
               .c_str());
  if (v.meta_before_wait && !o.metadata_before_wait)
    refuse("always reads indices and weights before its wait (no metadata-after-wait switch)");
  if (o.pdl.delay_ns != 0 || o.pdl.stamps != nullptr)
    refuse("has no delay or timestamp instrumentation");
  if (o.pre_wait_snapshot != nullptr)
    refuse("cannot record the indices it read (no pre-wait snapshot)");
  if (o.slice_chunks != 0)
    refuse("has the released slice width (no slice_chunks)");
}

template <Kernel kKernel>
finalize::LaunchPlan geometry(FinalizeParams const& p, finalize::Options const& o,
                              FinalizeVariant const& v) {
  refuse_knobs(o, v);
  LaunchPlan const r = plan(p, kKernel);
  finalize::LaunchPlan lp;
  lp.grid_x = r.grid_x;
  lp.grid_y = r.grid_y;
  lp.block_x = r.block_x;
  lp.block_y = r.block_y;
  // Independent expert loads in flight per thread: the top-K unroll of the released template,
  // or, in the small-batch kernel, the experts of one thread group (K / split, at most 4).
  lp.loads_per_thread = r.kernel == Kernel::kSmallBatch
                            ? static_cast<int>((p.top_k + r.k_split - 1) / r.k_split)
                            : r.unroll;
  return lp;
}

template <Kernel kKernel>
void launch(FinalizeParams const& p, finalize::Options const& o, finalize::LaunchPlan const&,
            Stream stream) {
  Options fo;
  fo.kernel = kKernel;
  fo.pdl = o.pdl.pdl;
  run(p, fo, stream);
}

constexpr unsigned kCheckSweep = finalize::kListCheck | finalize::kListSweep;

// In table order after moefin's entries (which stop below 100).
Registrar const kFiScalar(
    variant_entry(kernel_name(Kernel::kScalar))
        .as(Role::kPrevious, Source::kReleased)
        .triggers(Trigger::kExit)
        .listed(kCheckSweep, 110)
        .noted("released finalizeKernel (the previous kernel): waits at entry; the released "
               "ratios' baseline")
        .runs(geometry<Kernel::kScalar>, launch<Kernel::kScalar>));

Registrar const kFiSmallBatch(
    variant_entry(kernel_name(Kernel::kSmallBatch))
        .as(Role::kSmallBatch, Source::kReleased)
        .against(kernel_name(Kernel::kScalar))
        .triggers(Trigger::kEntry)
        .meta_before()
        .vectorized(64)
        .listed(kCheckSweep, 120)
        .noted("released finalizeKernelSmallBatch in its released geometry (one token per "
               "blockIdx.x, 256 threads split over top-K)")
        .runs(geometry<Kernel::kSmallBatch>, launch<Kernel::kSmallBatch>));

Registrar const
    kFiVecload(variant_entry(kernel_name(Kernel::kVecload))
                   .as(Role::kLargeBatch, Source::kReleased)
                   .against(kernel_name(Kernel::kScalar))
                   .triggers(Trigger::kExit)
                   .meta_before()
                   .vectorized(64)
                   .listed(kCheckSweep, 130)
                   .noted("released finalizeKernelVecLoad: one CTA per token, 128-bit loads")
                   .runs(geometry<Kernel::kVecload>, launch<Kernel::kVecload>));

// The released dispatcher picks one of the three per shape, with its own CTA budget (1184);
// its PDL fields are the most permissive of the kernels it may pick (entry trigger, metadata
// before the wait), so a plan built from them never claims an ordering the launch lacks.
Registrar const kFiDispatch(
    variant_entry(kernel_name(Kernel::kDispatch))
        .as(Role::kDispatch, Source::kReleased)
        .against(kernel_name(Kernel::kScalar))
        .triggers(Trigger::kEntry)
        .meta_before()
        .listed(finalize::kListCheck, 150)
        .noted("released host dispatcher moe::dev::finalize::run (picks fi_small_batch, "
               "fi_scalar or fi_vecload per shape)")
        .runs(geometry<Kernel::kDispatch>, launch<Kernel::kDispatch>));

} // namespace

} // namespace moefin::external::flashinfer
