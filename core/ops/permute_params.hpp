#pragma once
// Permute: gather hidden states into the permuted (expert-grouped) order. Shared by the CUDA
// kernel and the Kokkos reference. Header-only, no CUDA.

#include "core/ops/pdl_knobs.hpp"

#include <cstdint>

namespace moefin::permute {

/// Trigger::kDefault of the permute kernel: at entry, then the wait (the seed's kernel).
inline constexpr Trigger kDefaultTrigger = Trigger::kEntry;

struct PermuteParams {
  void const* hidden_states = nullptr;             // bf16 [num_tokens, hidden]
  std::int32_t const* permuted_to_token = nullptr; // [max_rows]; -1 on padding rows
  std::int32_t const* total_padded_rows = nullptr; // [1], written by routing
  void* permuted = nullptr; // bf16 [max_rows, hidden]; padding rows written as zeros so that
                            // every GEMM input element is defined (bitwise comparisons)
  std::int64_t num_tokens = 0;
  std::int64_t hidden = 0;
  std::int64_t max_rows = 0;
};

} // namespace moefin::permute
