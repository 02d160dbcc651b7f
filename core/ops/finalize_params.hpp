#pragma once
// The finalize operation's parameters, shared by the CUDA kernels (kernels/finalize/) and the
// Kokkos reference (reference/finalize.*), so that the two cannot disagree about a layout.
// Plain struct of raw pointers and sizes, passed by value; pointers are device pointers for the
// CUDA path and host pointers for the reference. Header-only, no CUDA.

#include <cstdint>
#include <string_view>

namespace moefin::finalize {

enum class WeightType : std::int32_t {
  kNone = 0, // no weights pointer: every expert contributes with weight 1
  kBf16 = 1,
  kFp32 = 2,
};

inline char const* weight_type_name(WeightType w) { // "none", "bf16", "fp32"
  switch (w) {
  case WeightType::kNone:
    return "none";
  case WeightType::kBf16:
    return "bf16";
  case WeightType::kFp32:
    return "fp32";
  }
  return "?";
}

inline bool parse_weight_type(std::string_view s, WeightType* out) {
  for (auto w : {WeightType::kNone, WeightType::kBf16, WeightType::kFp32})
    if (s == weight_type_name(w)) {
      *out = w;
      return true;
    }
  return false;
}

struct FinalizeParams {
  // Inputs.
  void const* gemm_out = nullptr;       // bf16 [num_rows, hidden_padded], permuted rows
  void const* expert_weights = nullptr; // [num_tokens, top_k], bf16 or fp32
  std::int32_t const* expanded_to_permuted = nullptr; // [num_tokens * top_k]; -1: not local
  // Output.
  void* out = nullptr; // bf16 [num_tokens, hidden] (E4M3 bytes for the DeepSeek-FP8 variant)

  // DeepSeek-FP8 block scales (only for that variant; 128-column blocks).
  float const* in_scales = nullptr; // [num_rows, ceil(hidden_padded / 128)] dequantization scales
  float* out_scales = nullptr;      // [num_tokens, ceil(hidden / 128)] quantization scales

  // Sizes.
  std::int64_t num_tokens = 0;
  std::int64_t hidden = 0;        // output row length
  std::int64_t hidden_padded = 0; // row stride of gemm_out, >= hidden
  std::int64_t top_k = 0;
  std::int64_t num_rows = 0; // rows of gemm_out (total padded rows of the routing layout)
  WeightType weight_type = WeightType::kBf16;
};

} // namespace moefin::finalize
