#include "kernels/chain/chain_launches.hpp"

#include <stdexcept>

namespace moefin::chain {

std::vector<LaunchDescriptor> layer_launches(LayerPlan const& plan, RunFlags const& run) {
  if (plan.finalize == nullptr || plan.kernels.size() != static_cast<std::size_t>(kPlanKernels))
    throw std::logic_error("layer_launches: incomplete layer plan");
  std::vector<LaunchDescriptor> out;
  for (KernelPlan const& k : plan.kernels) {
    if ((k.kernel == Kernel::kChecksum && !run.checked) || !k.launched)
      continue;
    LaunchDescriptor d;
    d.kernel = k.kernel;
    d.impl = k.impl;
    d.knobs.pdl = run.pdl && k.pdl;
    d.knobs.trigger = k.trigger;
    d.knobs.delay_ns = k.delay_ns;
    d.knobs.ctas_per_sm = run.ctas_per_sm;
    d.knobs.max_shared_carveout = run.max_shared_carveout;
    // The snapshot is a measurement of the checked runs; timing runs launch finalize without it
    // (so that they time the lean instantiation the dispatcher picks).
    d.snapshot = plan.snapshot && run.checked;
    d.released = k.released;
    d.repoison = k.kernel == Kernel::kChecksum && plan.repoison;
    d.gate_second = k.kernel == Kernel::kGemm1 && plan.gate_second;
    // Finalize inside GEMM2: GEMM1 clears the arrival counters, GEMM2 reduces.
    d.fused =
        plan.finalize->inside_gemm2 && (k.kernel == Kernel::kGemm1 || k.kernel == Kernel::kGemm2);
    d.wide = run.wide_gemms && k.impl == kDecodeGemmFp4;
    if (k.kernel == Kernel::kFinalize) {
      d.finalize.variant = plan.finalize;
      d.finalize.metadata_before_wait = plan.meta_allowed;
      d.finalize.pdl = d.knobs;
    }
    out.push_back(d);
  }
  return out;
}

} // namespace moefin::chain
