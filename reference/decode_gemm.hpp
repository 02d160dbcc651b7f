#pragma once
// Kokkos reference of the decode grouped GEMM (kernels/gemm/decode.hpp), host execution space
// (implied): the same params, host pointers; `total_padded_rows` points to a host int.

#include "core/ops/decode_gemm_params.hpp"

#include <vector>

namespace moefin::reference {

/// What the tolerance of a GEMM check is scaled by (FlashAttention's rule): the exact result and
/// a naive fp32 GEMM of the same dequantized operands. [max_rows][n]; NaN where no output is
/// defined (tiles of no valid expert, padding rows, rows from *total_padded_rows on).
struct GemmOracle {
  std::vector<double> exact; // the sum in double (products of bf16 or fp4 operands are exact)
  std::vector<float> naive;  // fp32, k ascending, every product and sum rounded, then bf16
};

/// c[r, j] = bf16(float(G * sum_i a[r, i] * w[x, j, i])), x = cta_to_expert[r / tile_m], for the
/// real rows r (row_token[r] >= 0, or every row when row_token is null) below
/// *total_padded_rows; w is the bf16 weight, or for kFp4 e2m1 * e4m3 of core/fp4.hpp with
/// G = global_scale[x] (G = 1 for bf16). The sum is in double, rounded to fp32, then to bf16.
/// Padding rows, tiles of expert -1 and columns [n, ldc) are not written (as the split-K kernel).
/// With `oracle`, also fills it. Throws InputError on bad sizes, null pointers or an expert id
/// outside [-1, num_local_experts).
void decode_gemm(gemm::DecodeGemmParams const& p, GemmOracle* oracle = nullptr);

/// Outcome of comparing a GEMM's bf16 output with an oracle on the rows the oracle defines.
struct GemmCheck {
  double max_err = 0;       // max |out - exact|; +inf for a NaN or unwritten output
  double naive_err = 0;     // max |naive - exact|
  double tolerance = 0;     // 2 * naive_err + 1e-6 * peak
  double peak = 0;          // max |exact|
  std::int64_t checked = 0; // outputs compared
  std::int64_t worst = -1;  // flat index of the largest error
  bool pass = false;
};
/// `out` bf16 bits [max_rows][ldc] against oracle [max_rows][n].
GemmCheck check_gemm(std::vector<std::uint16_t> const& out, std::int64_t ldc, std::int64_t n,
                     GemmOracle const& oracle);

} // namespace moefin::reference
