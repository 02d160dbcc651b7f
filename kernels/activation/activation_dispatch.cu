// activation::run: validation, the activation type as a template parameter, and launch.

#include "core/ops/ranges.hpp"
#include "kernels/activation/activation_kernels.cuh"

namespace moefin::activation {

void validate(ActivationParams const& p) {
  ranges::check_multiple("activation inter", p.inter, 8);
  ranges::check_range<std::int64_t>("activation max_rows", p.max_rows, 1, 1 << 30);
  if (!p.in || !p.out || !p.total_padded_rows)
    throw InputError("activation: a buffer pointer is null");
}

std::int64_t num_ctas(ActivationParams const& p, int ctas_per_sm) {
  return resident_grid(p.max_rows, ctas_per_sm > 0 ? ctas_per_sm : Policy::kCtasPerSm);
}

void run(ActivationParams const& p, PdlKnobs const& knobs, Stream stream) {
  validate(p);
  dim3 const grid(static_cast<unsigned>(num_ctas(p, knobs.ctas_per_sm)));
  PdlDevice const k = pdl_device(knobs, kDefaultTrigger);
  set_shared_memory(activation_kernel<Type::kSwiGlu>, knobs.max_shared_carveout);
  set_shared_memory(activation_kernel<Type::kRelu2>, knobs.max_shared_carveout);
  if (p.type == Type::kSwiGlu)
    launch_kernel(activation_kernel<Type::kSwiGlu>, grid, dim3(Policy::kThreads), 0, stream,
                  knobs.pdl, p, k);
  else
    launch_kernel(activation_kernel<Type::kRelu2>, grid, dim3(Policy::kThreads), 0, stream,
                  knobs.pdl, p, k);
}

} // namespace moefin::activation
