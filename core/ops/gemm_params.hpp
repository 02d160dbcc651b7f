#pragma once
// Grouped GEMM over the permuted rows: rows of expert e (a tile-padded group) times that expert's
// weight matrix. bf16 inputs, fp32 accumulation, bf16 output. Shared by the CUDA kernel and the
// Kokkos reference. Header-only, no CUDA.
//   GEMM1 (gate/up): k = hidden, n = 2 * inter (SwiGLU: gate columns [0, inter), up [inter, 2
//   inter))
//                    or n = inter (ReLU^2, no gate)
//   GEMM2 (down):    k = inter,  n = hidden  (writes gemm2Out, the finalize input)

#include "core/ops/pdl_knobs.hpp"

#include <cstdint>

namespace moefin::gemm {

/// Trigger::kDefault of the grouped GEMM: implicitly at exit (the seed does not show where its
/// GEMMs trigger; in moefin it is a knob).
inline constexpr Trigger kDefaultTrigger = Trigger::kExit;

struct GroupedGemmParams {
  void const* a = nullptr; // bf16 [max_rows, k], permuted activations
  void const* b = nullptr; // bf16 [num_local_experts, n, k], each expert's weights (out = a * b^T)
  void* c = nullptr;       // bf16 [max_rows, ldc]
  std::int32_t const* cta_to_expert = nullptr;     // [max_rows / tile_m]; -1 past the end
  std::int32_t const* total_padded_rows = nullptr; // [1], written by routing
  // Optional [max_rows], routing's permuted row -> token: rows with a negative entry are tile
  // padding and are taken as zero rows of a, unread (permute writes zeros there, so the result
  // is the same; decode tiles are mostly padding). nullptr: every row of a is read.
  std::int32_t const* row_token = nullptr;
  std::int64_t max_rows = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t ldc = 0; // row stride of c, >= n (hidden padded for GEMM2)
  std::int64_t tile_m = 128;
  std::int64_t num_local_experts = 0;
};

} // namespace moefin::gemm
