// permute::run: validation and launch.

#include "core/ops/ranges.hpp"
#include "kernels/permute/permute_kernels.cuh"

namespace moefin::permute {

void validate(PermuteParams const& p) {
  ranges::check_range<std::int64_t>("permute num_tokens", p.num_tokens, 1, 1 << 20);
  ranges::check_multiple("permute hidden", p.hidden, 8);
  ranges::check_range<std::int64_t>("permute max_rows", p.max_rows, 1, 1 << 30);
  if (!p.hidden_states || !p.permuted_to_token || !p.total_padded_rows || !p.permuted)
    throw InputError("permute: a buffer pointer is null");
}

std::int64_t num_ctas(PermuteParams const& p, int ctas_per_sm) {
  return resident_grid(p.max_rows, ctas_per_sm > 0 ? ctas_per_sm : Policy::kCtasPerSm);
}

void run(PermuteParams const& p, PdlKnobs const& knobs, Stream stream) {
  validate(p);
  set_shared_memory(permute_kernel, knobs.max_shared_carveout);
  launch_kernel(permute_kernel, dim3(static_cast<unsigned>(num_ctas(p, knobs.ctas_per_sm))),
                dim3(Policy::kThreads), 0, stream, knobs.pdl, p,
                pdl_device(knobs, kDefaultTrigger));
}

} // namespace moefin::permute
