// finalize::run: the one place where runtime flags become template parameters. The shape checks
// and the geometry come from plan() (finalize_select.cpp, host only); this file turns the plan
// into a cudaLaunchKernelEx launch of the right instantiation.

#include "kernels/common/cuda_check.hpp"
#include "kernels/common/pdl.cuh"
#include "kernels/common/static_switch.hpp"
#include "kernels/finalize/finalize.hpp"
#include "kernels/finalize/finalize_kernels.cuh"

namespace moefin::finalize {

namespace {

template <class F> void weight_switch(WeightType w, F&& f) {
  value_switch<WeightType, WeightType::kNone, WeightType::kBf16, WeightType::kFp32>(
      w, "finalize weight_type", std::forward<F>(f));
}

kernels::Knobs knobs_of(LaunchPlan const& lp, Options const& o) {
  kernels::Knobs k;
  k.trigger = static_cast<std::int32_t>(lp.trigger);
  k.meta_before_wait = o.metadata_before_wait ? 1 : 0;
  k.delay_ns = o.pdl.delay_ns;
  k.stamps = o.pdl.stamps;
  k.snapshot = o.pre_wait_snapshot;
  return k;
}

} // namespace

int device_cta_budget() {
  int dev = 0;
  MOEFIN_CUDA_CHECK(cudaGetDevice(&dev));
  int sms = 0;
  MOEFIN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms * 8;
}

void run(FinalizeParams const& p, Options const& o, Stream stream) {
  LaunchPlan const lp = plan(p, o);
  kernels::Knobs const k = knobs_of(lp, o);
  dim3 const grid(static_cast<unsigned>(lp.grid_x), static_cast<unsigned>(lp.grid_y));
  dim3 const block(static_cast<unsigned>(lp.block_x), static_cast<unsigned>(lp.block_y));
  bool const pdl = o.pdl.pdl;
  weight_switch(p.weight_type, [&](auto w) {
    constexpr WeightType kW = decltype(w)::value;
    switch (lp.variant) {
    case Variant::kScalar:
      launch_kernel(kernels::finalize_scalar<kW>, grid, block, 0, stream, pdl, p, k);
      break;
    case Variant::kVecload:
      value_switch<int, 1, 2, 4>(lp.loads_per_thread, "finalize vecload unroll", [&](auto u) {
        launch_kernel(kernels::finalize_vecload<kW, decltype(u)::value>, grid, block, 0, stream,
                      pdl, p, k);
      });
      break;
    case Variant::kSmallBatch:
      bool_switch(o.split_topk, [&](auto split) {
        launch_kernel(kernels::finalize_small_batch<kW, decltype(split)::value>, grid, block, 0,
                      stream, pdl, p, k);
      });
      break;
    case Variant::kDeepseekFp8:
      launch_kernel(kernels::finalize_deepseek<kW>, grid, block, 0, stream, pdl, p, k);
      break;
    default:
      throw InputError(std::string("finalize: cannot launch variant ") + variant_name(lp.variant));
    }
  });
}

} // namespace moefin::finalize
