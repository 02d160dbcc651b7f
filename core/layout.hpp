#pragma once
// Routing of one MoE layer and the permuted layout derived from it (docs/design/computation.md).
// Host data; device code receives raw pointers to copies of these arrays.

#include <cstdint>
#include <vector>

namespace moefin {

/// Per-token expert choices: expanded index e = t * top_k + k.
struct Routing {
  std::int64_t num_tokens = 0;
  std::int64_t num_experts = 0;
  std::int64_t top_k = 0;
  std::vector<std::int32_t> expert_ids;    // [T*K] global expert id
  std::vector<float> weights;              // [T*K] expert weight (fp32 view)
  std::vector<std::uint16_t> weights_bf16; // [T*K] the same weights as bf16 bits
};

/// The permuted layout routing writes for the grouped GEMMs and finalize.
struct RoutingLayout {
  std::int64_t num_tokens = 0;
  std::int64_t top_k = 0;
  std::int64_t local_expert_begin = 0; // first local expert (expert parallelism)
  std::int64_t num_local_experts = 0;
  std::int64_t tile = 1; // GEMM tile rows; each expert's group is padded to a multiple of it

  std::vector<std::int32_t> expanded_to_permuted; // [T*K]; -1 when the expert is not local
  std::vector<std::int32_t> permuted_to_token;    // [total_padded_rows]; -1 on padding rows
  std::vector<std::int32_t> permuted_to_expanded; // [total_padded_rows]; -1 on padding rows
  std::vector<std::int32_t> expert_counts;        // [num_local_experts] rows routed to each
  std::vector<std::int32_t> expert_offsets;       // [num_local_experts + 1] tile-padded prefix
  std::vector<std::int32_t> cta_to_expert;        // [total_padded_rows / tile] local expert of a tile
  std::int64_t total_padded_rows = 0;
};

/// Throws InputError unless `routing` is well formed: sizes T*K, T >= 1, 1 <= K <= min(64, E),
/// expert ids in [0, E), the K experts of a token distinct.
void validate_routing(Routing const& routing);

/// Throws InputError naming --local-experts unless 0 <= begin <= E and 0 <= count <= E - begin.
void check_local_range(std::int64_t begin, std::int64_t count, std::int64_t num_experts);

/// The exact routing outputs (docs/design/computation.md) for local experts
/// [local_begin, local_begin + num_local); num_local < 0 means every expert is local.
/// Rows are grouped by local expert ascending, by token ascending inside a group; each group is
/// padded to a multiple of `tile` (an expert with no token takes no rows).
RoutingLayout build_layout(Routing const& routing, std::int64_t tile, std::int64_t local_begin = 0,
                           std::int64_t num_local = -1);

/// Capacity that holds the padded rows of every routing of this shape:
/// T*K + min(num_local, T*K) * (tile - 1) (only experts with a token are padded).
std::int64_t max_padded_rows(std::int64_t num_tokens, std::int64_t top_k, std::int64_t num_local,
                             std::int64_t tile);

/// Expanded indices routed to a non-local expert (expanded_to_permuted == -1).
std::int64_t dropped_entries(RoutingLayout const& layout);

} // namespace moefin
