// routing::run: validation, path selection and launch.

#include "core/ops/ranges.hpp"
#include "kernels/routing/routing_kernels.cuh"

namespace moefin::routing {

namespace {

// Masks (block kernel only), offsets, scan, and num_experts staged scores per warp.
std::size_t block_smem(RoutingParams const& p, int threads, bool with_masks) {
  std::size_t const L = static_cast<std::size_t>(p.num_local_experts);
  std::size_t const E = static_cast<std::size_t>(p.num_experts);
  return (with_masks ? L * kMaskWords * 4 : 0) + (L + 1) * 4 +
         static_cast<std::size_t>(threads) * 4 + static_cast<std::size_t>(threads / 32) * E * 4;
}

} // namespace

std::size_t workspace_bytes(RoutingParams const& p) {
  return (static_cast<std::size_t>(p.num_local_experts) * kMaskWords + 1) * sizeof(std::uint32_t);
}

void validate(RoutingParams const& p) {
  ranges::check_range<std::int64_t>("routing num_tokens", p.num_tokens, 1, Policy::kMaxTokens);
  ranges::check_range<std::int64_t>("routing num_experts", p.num_experts, 1, Policy::kMaxExperts);
  ranges::check_range<std::int64_t>("routing top_k", p.top_k, 1,
                                    std::min<std::int64_t>(Policy::kMaxTopK, p.num_experts));
  ranges::check_range<std::int64_t>("routing local_expert_begin", p.local_expert_begin, 0,
                                    p.num_experts - 1);
  ranges::check_range<std::int64_t>("routing num_local_experts", p.num_local_experts, 1,
                                    p.num_experts - p.local_expert_begin);
  ranges::check_range<std::int64_t>("routing tile", p.tile, 1, 1024);
  std::int64_t const routed = p.num_tokens * p.top_k;
  std::int64_t const need = routed + std::min(routed, p.num_local_experts) * (p.tile - 1);
  ranges::check_range<std::int64_t>("routing max_padded_rows", p.max_padded_rows, need, 1 << 30);
  ranges::check_multiple("routing max_padded_rows (a multiple of tile)", p.max_padded_rows, p.tile);
  if (!p.scores || !p.expert_ids || !p.expert_weights || !p.expanded_to_permuted ||
      !p.permuted_to_token || !p.permuted_to_expanded || !p.expert_counts || !p.expert_offsets ||
      !p.cta_to_expert || !p.total_padded_rows)
    throw InputError("routing: a buffer pointer is null");
  if (p.weight_type == finalize::WeightType::kNone)
    throw InputError("routing weight_type: none is not an output type (bf16 or fp32)");
}

bool uses_multi_cta(RoutingParams const& p, Workspace const& ws) {
  return ws.ptr != nullptr && p.num_tokens > Policy::kBlockMaxTokens;
}

std::int64_t num_ctas(RoutingParams const& p, Workspace const& ws) {
  if (!uses_multi_cta(p, ws))
    return 1;
  int const per = Policy::kMultiThreads / 32;
  return (p.num_tokens + per - 1) / per;
}

void run(RoutingParams const& p, PdlKnobs const& knobs, Stream stream) {
  run(p, knobs, Workspace{}, stream);
}

void run(RoutingParams const& p, PdlKnobs const& knobs, Workspace const& ws, Stream stream) {
  validate(p);
  PdlDevice const k = pdl_device(knobs, kDefaultTrigger);
  if (!uses_multi_cta(p, ws)) {
    std::size_t const smem = block_smem(p, Policy::kBlockThreads, true);
    set_shared_memory(routing_block_kernel, knobs.max_shared_carveout, smem);
    launch_kernel(routing_block_kernel, dim3(1), dim3(Policy::kBlockThreads), smem, stream,
                  knobs.pdl, p, k);
    return;
  }
  if (ws.bytes < workspace_bytes(p))
    throw InputError("routing workspace: " + std::to_string(ws.bytes) + " bytes, needs " +
                     std::to_string(workspace_bytes(p)));
  auto* masks = static_cast<std::uint32_t*>(ws.ptr);
  std::uint32_t* ticket = masks + p.num_local_experts * kMaskWords;
  std::size_t const smem = block_smem(p, Policy::kMultiThreads, false);
  set_shared_memory(routing_multi_kernel, knobs.max_shared_carveout, smem);
  launch_kernel(routing_multi_kernel, dim3(static_cast<unsigned>(num_ctas(p, ws))),
                dim3(Policy::kMultiThreads), smem, stream, knobs.pdl, p, k, masks, ticket);
}

} // namespace moefin::routing
