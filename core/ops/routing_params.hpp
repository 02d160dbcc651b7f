#pragma once
// Routing from router scores (the first kernel of the chain), shared by the CUDA kernels and the
// Kokkos reference. Header-only, no CUDA. Outputs are the arrays of core/layout.hpp.

#include "core/ops/finalize_params.hpp"
#include "core/ops/pdl_knobs.hpp"

#include <cstdint>

namespace moefin::routing {

/// Trigger::kDefault of the routing kernels: right after the wait, before the writes (the seed's
/// code); its previous placement is kAfterWrites.
inline constexpr Trigger kDefaultTrigger = Trigger::kAfterWait;

enum class Method : std::int32_t {
  kSoftmaxTopK = 0, // softmax over all experts, top-K, then (optionally) renormalize over the K
  kTopKSoftmax = 1, // top-K of the raw scores, then softmax over the K selected
};

/// Selection contract (both implementations): the K largest scores, ties to the lower expert id,
/// chosen on the raw fp32 scores (softmax is monotonic, so the choice is exact everywhere).
struct RoutingParams {
  // Input.
  float const* scores = nullptr; // [num_tokens, num_experts] router logits
  // Outputs.
  std::int32_t* expert_ids = nullptr;           // [T*K]
  void* expert_weights = nullptr;               // [T*K], bf16 or fp32 per weight_type
  std::int32_t* expanded_to_permuted = nullptr; // [T*K]; -1 for non-local experts
  std::int32_t* permuted_to_token = nullptr;    // [max_padded_rows]; -1 on padding rows
  std::int32_t* permuted_to_expanded = nullptr; // [max_padded_rows]; -1 on padding rows
  std::int32_t* expert_counts = nullptr;        // [num_local_experts]
  std::int32_t* expert_offsets = nullptr;       // [num_local_experts + 1], tile-padded
  std::int32_t* cta_to_expert = nullptr;        // [max_padded_rows / tile]; -1 past the end
  std::int32_t* total_padded_rows = nullptr;    // [1]

  // Sizes and options.
  std::int64_t num_tokens = 0;
  std::int64_t num_experts = 0;
  std::int64_t top_k = 0;
  std::int64_t local_expert_begin = 0;
  std::int64_t num_local_experts = 0;
  std::int64_t tile = 128;          // GEMM tile rows
  std::int64_t max_padded_rows = 0; // capacity of the permuted arrays (T*K + E_local*(tile-1))
  Method method = Method::kSoftmaxTopK;
  bool renormalize = true;
  finalize::WeightType weight_type = finalize::WeightType::kBf16;
};

} // namespace moefin::routing
