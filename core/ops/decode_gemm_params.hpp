#pragma once
// Params of the decode grouped GEMM (kernels/gemm/decode.hpp): the grouped GEMM's params plus the
// weight format. Shared by the CUDA kernel and the Kokkos reference (reference/decode_gemm.hpp).
// Header-only, no CUDA.

#include "core/ops/gemm_params.hpp"
#include "core/ops/scale_layout.hpp"
#include "core/ops/value_layout.hpp"

#include <cstdint>
#include <string>

namespace moefin::gemm {

/// How the weights of every expert are stored.
enum class WeightFormat : std::int32_t {
  kBf16 = 0, // `gemm.b`: bf16 [experts][n][k]
  kFp4 = 1,  // laid out like NVFP4 (core/fp4.hpp): `gemm.b` packed e2m1 [experts][n][k / 2]
             // bytes (the lower k in the low nibble), `scales` e4m3 [experts][n][k / 16]
             // (stored as `scale_layout` says: core/fp4.hpp), `global_scale` fp32 [experts];
             // w = e2m1 * e4m3 * global
};

inline char const* weight_format_name(WeightFormat f) {
  return f == WeightFormat::kFp4 ? "fp4" : f == WeightFormat::kBf16 ? "bf16" : "?";
}
/// "bf16" or "fp4"; false for anything else.
inline bool parse_weight_format(std::string const& s, WeightFormat* out) {
  for (WeightFormat f : {WeightFormat::kBf16, WeightFormat::kFp4})
    if (s == weight_format_name(f)) {
      if (out)
        *out = f;
      return true;
    }
  return false;
}

struct DecodeGemmParams {
  GroupedGemmParams gemm; // a, b (the weight values), c, maps and sizes as the grouped GEMM's
  WeightFormat format = WeightFormat::kBf16;
  std::uint8_t const* scales = nullptr; // kFp4 only
  float const* global_scale = nullptr;  // kFp4 only
  // kFp4 only: how `scales` is stored (core/fp4.hpp). kTiled is read by the split-K decode GEMM
  // with 16-byte copies (DecodeOptions: the `tscale` candidate of decode_candidates.hpp).
  fp4::ScaleLayout scale_layout = fp4::ScaleLayout::kRowMajor;
  // kFp4 only: how the values' 32-bit words are stored (core/fp4.hpp). kPacked is read by the
  // split-K decode GEMM with tiled scales (the `wpack` candidate of decode_candidates.hpp),
  // kTiles by its wide launch only (the `tiles` candidate).
  fp4::ValueLayout value_layout = fp4::ValueLayout::kNibbles;
};

/// Bytes of one expert's weights as stored (values and, for kFp4, the scales): what a GEMM that
/// reads each weight once moves per active expert.
inline std::int64_t expert_weight_bytes(WeightFormat f, std::int64_t n, std::int64_t k) {
  return f == WeightFormat::kFp4 ? n * (k / 2 + k / 16) : n * k * 2;
}

} // namespace moefin::gemm
