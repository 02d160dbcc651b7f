// routing::run_fast: validation, scores per lane as a template parameter, and launch.

#include "core/ops/ranges.hpp"
#include "kernels/routing/fast_routing_kernels.cuh"
#include "kernels/routing/routing.hpp"

#include <algorithm>

namespace moefin::routing {

void validate_fast(RoutingParams const& p) {
  validate(p);
  ranges::check_range<std::int64_t>("routing (fast) num_tokens", p.num_tokens, 1,
                                 FastPolicy::kMaxTokens);
}

void run_fast(RoutingParams const& p, PdlKnobs const& knobs, CUstream_st* stream) {
  validate_fast(p);
  PdlDevice const k = pdl_device(knobs, kDefaultTrigger);
  std::size_t const smem =
      static_cast<std::size_t>(2 * p.num_local_experts + 1 + p.num_tokens * p.top_k + 32 +
                               p.num_tokens * p.num_experts) *
      4;
  dim3 const block(static_cast<unsigned>(fast_threads(p)));
  auto launch = [&](auto kernel) {
    set_shared_memory(kernel, knobs.max_shared_carveout, smem);
    launch_kernel(kernel, dim3(1), block, smem, stream, knobs.pdl, p, k);
  };
  switch (fast_scores_per_lane(p.num_experts)) {
  case 1:
    launch(routing_fast_kernel<1>);
    break;
  case 2:
    launch(routing_fast_kernel<2>);
    break;
  case 4:
    launch(routing_fast_kernel<4>);
    break;
  case 8:
    launch(routing_fast_kernel<8>);
    break;
  case 16:
    launch(routing_fast_kernel<16>);
    break;
  default:
    launch(routing_fast_kernel<32>);
  }
}

} // namespace moefin::routing
