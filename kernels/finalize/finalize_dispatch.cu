// finalize::run and moefin's finalize variants: the one place where runtime flags become
// template parameters, and the registry entry of every variant beside its launch code (one entry
// per variant). The shape checks and the geometry come from plan() (finalize_select.cpp, host
// only). In host-only builds this file compiles as C++: the entries are registered with a null
// launch function and the kernels are left out.

#include "kernels/finalize/finalize.hpp"

#if defined(__CUDACC__)
#include "kernels/common/cuda_check.hpp"
#include "kernels/common/pdl.cuh"
#include "kernels/common/static_switch.hpp"
#include "kernels/finalize/finalize_kernels.cuh"
#endif

namespace moefin::finalize {

#if defined(__CUDACC__)
namespace {

template <class F> void weight_switch(WeightType w, F&& f) {
  value_switch<WeightType, WeightType::kNone, WeightType::kBf16, WeightType::kFp32>(
      w, "finalize weight_type", std::forward<F>(f));
}

dim3 grid_of(LaunchPlan const& lp) {
  return dim3(static_cast<unsigned>(lp.grid_x), static_cast<unsigned>(lp.grid_y));
}

dim3 block_of(LaunchPlan const& lp) {
  return dim3(static_cast<unsigned>(lp.block_x), static_cast<unsigned>(lp.block_y));
}

void launch_scalar(FinalizeParams const& p, Options const& o, LaunchPlan const& lp, Stream s) {
  weight_switch(p.weight_type, [&](auto w) {
    launch_kernel(kernels::finalize_scalar<decltype(w)::value>, grid_of(lp), block_of(lp), 0, s,
                  o.pdl.pdl, p, kernels::knobs_of(lp, o));
  });
}

void launch_vecload(FinalizeParams const& p, Options const& o, LaunchPlan const& lp, Stream s) {
  weight_switch(p.weight_type, [&](auto w) {
    value_switch<int, 1, 2, 4>(lp.loads_per_thread, "finalize vecload unroll", [&](auto u) {
      launch_kernel(kernels::finalize_vecload<decltype(w)::value, decltype(u)::value>, grid_of(lp),
                    block_of(lp), 0, s, o.pdl.pdl, p, kernels::knobs_of(lp, o));
    });
  });
}

template <bool kSplit>
void launch_small_batch(FinalizeParams const& p, Options const& o, LaunchPlan const& lp, Stream s) {
  weight_switch(p.weight_type, [&](auto w) {
    launch_kernel(kernels::finalize_small_batch<decltype(w)::value, kSplit>, grid_of(lp),
                  block_of(lp), 0, s, o.pdl.pdl, p, kernels::knobs_of(lp, o));
  });
}

void launch_deepseek(FinalizeParams const& p, Options const& o, LaunchPlan const& lp, Stream s) {
  weight_switch(p.weight_type, [&](auto w) {
    launch_kernel(kernels::finalize_deepseek<decltype(w)::value>, grid_of(lp), block_of(lp), 0, s,
                  o.pdl.pdl, p, kernels::knobs_of(lp, o));
  });
}

} // namespace

int device_cta_budget() {
  int dev = 0;
  MOEFIN_CUDA_CHECK(cudaGetDevice(&dev));
  int sms = 0;
  MOEFIN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms * 8;
}
#else
int device_cta_budget() {
  throw DeviceError("finalize: this moefin was built without CUDA (no device CTA budget)");
}
#endif

void run(FinalizeParams const& p, Options const& o, Stream stream) {
  LaunchPlan const lp = plan(p, o);
  if (lp.variant->launch == nullptr)
    throw DeviceError("finalize: variant " + lp.variant->name +
                      " has no launch function in this build (built without CUDA)");
  lp.variant->launch(p, o, lp, stream);
}

namespace {

constexpr unsigned kCheckSweep = kListCheck | kListSweep;

// The registry entries of moefin's variants (core/ops/finalize_variants.hpp), in table order.
Registrar const kScalar(
    variant_entry("scalar")
        .as(Role::kPrevious)
        .triggers(Trigger::kExit)
        .dispatched()
        .listed(kCheckSweep, 10)
        .noted(
            "the previous kernel: one element per thread, waits at entry; every ratio's baseline")
        .runs(scalar_geometry, MOEFIN_FINALIZE_LAUNCH(launch_scalar)));
Registrar const kSmallBatch(
    variant_entry("small_batch")
        .as(Role::kSmallBatch)
        .against("scalar")
        .triggers(Trigger::kEntry)
        .meta_before()
        .vectorized(64)
        .dispatched()
        .listed(kCheckSweep, 20)
        .noted("the seed's kernel: (hidden slice, token) CTAs, top-K split, trigger at entry")
        .runs(small_batch_geometry, MOEFIN_FINALIZE_LAUNCH(launch_small_batch<true>)));
Registrar const kSmallBatchNosplit(
    variant_entry("small_batch_nosplit")
        .as(Role::kSmallBatch)
        .against("scalar")
        .ablates("small_batch", "top-K split")
        .triggers(Trigger::kEntry)
        .meta_before()
        .vectorized(64)
        .listed(kCheckSweep, 21)
        .noted("small_batch with the whole top-K in one thread group")
        .runs(small_batch_nosplit_geometry, MOEFIN_FINALIZE_LAUNCH(launch_small_batch<false>)));
Registrar const kSmallBatchLateTrigger(
    variant_entry("small_batch_late_trigger")
        .as(Role::kSmallBatch)
        .against("scalar")
        .ablates("small_batch", "early trigger")
        .triggers(Trigger::kExit)
        .meta_before()
        .vectorized(64)
        .listed(kCheckSweep, 22)
        .noted("small_batch triggering at its CTAs' exit instead of at entry")
        .runs(small_batch_geometry, MOEFIN_FINALIZE_LAUNCH(launch_small_batch<true>)));
Registrar const kSmallBatchMetaAfterWait(
    variant_entry("small_batch_meta_after_wait")
        .as(Role::kSmallBatch)
        .against("scalar")
        .ablates("small_batch", "pre-wait metadata")
        .triggers(Trigger::kEntry)
        .vectorized(64)
        .listed(kCheckSweep, 23)
        .noted("small_batch reading indices and weights after its wait")
        .runs(small_batch_geometry, MOEFIN_FINALIZE_LAUNCH(launch_small_batch<true>)));
Registrar const kVecload(variant_entry("vecload")
                             .as(Role::kLargeBatch)
                             .against("scalar")
                             .triggers(Trigger::kExit)
                             .meta_before()
                             .vectorized(64)
                             .dispatched()
                             .listed(kCheckSweep, 30)
                             .noted("the large-batch kernel: one CTA per token, 128-bit loads")
                             .runs(vecload_geometry, MOEFIN_FINALIZE_LAUNCH(launch_vecload)));
Registrar const kDeepseekFp8(
    variant_entry("deepseek_fp8")
        .as(Role::kFp8)
        .triggers(Trigger::kExit)
        .fp8()
        .dispatched()
        .listed(kListCheck, 40)
        .noted("DeepSeek-FP8 block scales, E4M3 output with per-(token, 128-column) scales")
        .runs(deepseek_geometry, MOEFIN_FINALIZE_LAUNCH(launch_deepseek)));

} // namespace

} // namespace moefin::finalize
