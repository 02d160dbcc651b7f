// A finalize variant that exists only in the test tree: one kernel function and one registry
// entry, nothing else edited. The tests that link this file (test_finalize_variant and its gpu
// twin) show that such a variant appears in `check finalize`, `sweep finalize` (rows and table
// columns) and the layer chain. In host-only builds this file compiles as C++: the entry is
// registered without a launch function.
//
// The kernel: one thread per output element, 128 threads per CTA, grid (ceil(H / 128), T); it
// waits at entry and sums in ascending k with rounded products, so it is bitwise equal to
// reference::finalize.

#include "core/ops/errors.hpp"
#include "kernels/finalize/finalize.hpp"

#if defined(__CUDACC__)
#include "kernels/common/pdl.cuh"
#include "kernels/common/static_switch.hpp"
#include "kernels/finalize/finalize_kernels.cuh"
#endif

#include <string>

namespace moefin::finalize::test_variant {

constexpr int kThreads = 128;
constexpr int kMaxTokens = 65535; // gridDim.y

#if defined(__CUDACC__)
namespace {

template <WeightType W>
__global__ void __launch_bounds__(kThreads)
    finalize_rowwise(FinalizeParams const p, kernels::Knobs const k) {
  kernels::CtaStamps st(k);
  kernels::trigger_if(k, Trigger::kEntry, st);
  kernels::wait_primary(k, st);
  std::int64_t const t = blockIdx.y;
  std::int64_t const h = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  auto const* in = static_cast<__nv_bfloat16 const*>(p.gemm_out);
  if (h < p.hidden) {
    float acc = 0.0f;
    for (int kk = 0; kk < p.top_k; ++kk) {
      std::int64_t const e = t * p.top_k + kk;
      std::int32_t const row = p.expanded_to_permuted[e];
      if (!kernels::row_ok(row, p.num_rows))
        continue;
      float const w = kernels::load_weight<W>(p.expert_weights, e);
      acc = kernels::fma_rounded(acc, w, __bfloat162float(in[row * p.hidden_padded + h]));
    }
    kernels::delay_before_write(k);
    static_cast<__nv_bfloat16*>(p.out)[t * p.hidden + h] = __float2bfloat16_rn(acc);
  }
  if (k.snapshot && blockIdx.x == 0 && threadIdx.x == 0)
    for (int kk = 0; kk < p.top_k; ++kk)
      k.snapshot[t * p.top_k + kk] = p.expanded_to_permuted[t * p.top_k + kk];
  kernels::trigger_after_writes(k, st);
  st.finish();
}

void launch(FinalizeParams const& p, Options const& o, LaunchPlan const& lp, Stream s) {
  dim3 const grid(static_cast<unsigned>(lp.grid_x), static_cast<unsigned>(lp.grid_y));
  value_switch<WeightType, WeightType::kNone, WeightType::kBf16, WeightType::kFp32>(
      p.weight_type, "test_rowwise weight_type", [&](auto w) {
        launch_kernel(finalize_rowwise<decltype(w)::value>, grid, dim3(kThreads), 0, s, o.pdl.pdl,
                      p, kernels::knobs_of(lp, o));
      });
}

} // namespace
#endif

LaunchPlan geometry(FinalizeParams const& p, Options const&, FinalizeVariant const& v) {
  if (p.num_tokens > kMaxTokens)
    throw InputError("finalize: variant " + v.name + " supports at most " +
                     std::to_string(kMaxTokens) + " tokens");
  LaunchPlan lp;
  lp.grid_x = static_cast<int>((p.hidden + kThreads - 1) / kThreads);
  lp.grid_y = static_cast<int>(p.num_tokens);
  lp.block_x = kThreads;
  lp.block_y = 1;
  lp.loads_per_thread = 1;
  return lp;
}

Registrar const kRowwise(variant_entry("test_rowwise")
                             .as(Role::kPrevious, Source::kTest)
                             .against("scalar")
                             .triggers(Trigger::kExit)
                             .listed(kListCheck | kListSweep | kListChain, 900)
                             .noted("test tree: one element per thread, 128 threads per CTA")
                             .runs(geometry, MOEFIN_FINALIZE_LAUNCH(launch)));

} // namespace moefin::finalize::test_variant
