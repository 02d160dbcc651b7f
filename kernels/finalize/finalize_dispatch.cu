// finalize::run and moefin's finalize variants: the one place where runtime flags become
// template parameters (the lean or the instrumented instantiation, plan()'s LaunchPlan::lean),
// and the registry entry of every variant beside its launch code (one entry per variant;
// small_batch_v2's are in small_batch_v2_dispatch.cu). The shape checks and the geometry come from
// plan() (finalize_select.cpp, host only). In host-only builds this file compiles as C++: the
// entries are registered with a null launch function and the kernels are left out.

#include "kernels/finalize/finalize.hpp"

#if defined(__CUDACC__)
#include "kernels/common/cuda_check.hpp"
#include "kernels/common/pdl.cuh"
#include "kernels/common/static_switch.hpp"
#include "kernels/finalize/finalize_kernels.cuh"

#include <stdexcept>
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

using kernels::Knobs;
using kernels::Lean;
using kernels::Weights;
constexpr Trigger kEntry = Trigger::kEntry;
constexpr Trigger kExit = Trigger::kExit;
constexpr Weights kAnyWeights = kernels::kRuntimeWeights;

/// One launch of a plan's geometry.
struct Go {
  LaunchPlan const& lp;
  Options const& o;
  Stream s;
  template <class... KArgs, class... Args> void operator()(void (*kernel)(KArgs...), Args&&... a) {
    launch_kernel(kernel, grid_of(lp), block_of(lp), 0, s, o.pdl.pdl, std::forward<Args>(a)...);
  }
};

[[noreturn]] void no_lean_kernel(LaunchPlan const& lp) {
  throw std::logic_error("finalize: plan() chose a lean launch of " + lp.variant->name +
                         " that has no lean kernel (has_lean and the launch disagree)");
}

// Lean launches (LaunchPlan::lean, decided by has_lean): one instantiation per weight type and
// per placement has_lean allows; instrumented ones: every knob and the weight type at run time.
void launch_scalar(FinalizeParams const& p, Options const& o, LaunchPlan const& lp, Stream s) {
  Go go{lp, o, s};
  if (!lp.lean)
    return go(kernels::finalize_scalar<kAnyWeights, Knobs>, p, kernels::knobs_of(lp, o));
  using K = Lean<kExit, false>;
  weight_switch(p.weight_type, [&](auto w) {
    go(kernels::finalize_scalar<kernels::weights_of(decltype(w)::value), K>, p, K{});
  });
}

void launch_vecload(FinalizeParams const& p, Options const& o, LaunchPlan const& lp, Stream s) {
  Go go{lp, o, s};
  value_switch<int, 1, 2, 4>(lp.loads_per_thread, "finalize vecload unroll", [&](auto u) {
    constexpr int kU = decltype(u)::value;
    if (!lp.lean)
      return go(kernels::finalize_vecload<kAnyWeights, kU, Knobs>, p, kernels::knobs_of(lp, o));
    using K = Lean<kExit, true>;
    weight_switch(p.weight_type, [&](auto w) {
      go(kernels::finalize_vecload<kernels::weights_of(decltype(w)::value), kU, K>, p, K{});
    });
  });
}

template <bool kSplit>
void launch_small_batch(FinalizeParams const& p, Options const& o, LaunchPlan const& lp, Stream s) {
  Go go{lp, o, s};
  if (!lp.lean)
    return go(kernels::finalize_small_batch<kAnyWeights, kSplit, Knobs>, p,
              kernels::knobs_of(lp, o));
  weight_switch(p.weight_type, [&](auto w) {
    constexpr Weights kW = kernels::weights_of(decltype(w)::value);
    bool const before = lp.meta_before_wait;
    if (lp.trigger == kEntry && before)
      go(kernels::finalize_small_batch<kW, kSplit, Lean<kEntry, true>>, p, Lean<kEntry, true>{});
    else if constexpr (!kSplit)
      no_lean_kernel(lp);
    else if (lp.trigger == kExit && before)
      go(kernels::finalize_small_batch<kW, true, Lean<kExit, true>>, p, Lean<kExit, true>{});
    else if (lp.trigger == kEntry && !before)
      go(kernels::finalize_small_batch<kW, true, Lean<kEntry, false>>, p, Lean<kEntry, false>{});
    else
      no_lean_kernel(lp);
  });
}

void launch_deepseek(FinalizeParams const& p, Options const& o, LaunchPlan const& lp, Stream s) {
  Go go{lp, o, s};
  if (!lp.lean)
    return go(kernels::finalize_deepseek<kAnyWeights, Knobs>, p, kernels::knobs_of(lp, o));
  using K = Lean<kExit, false>;
  weight_switch(p.weight_type, [&](auto w) {
    go(kernels::finalize_deepseek<kernels::weights_of(decltype(w)::value), K>, p, K{});
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
