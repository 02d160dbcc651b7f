#pragma once
// Kokkos reference of the finalize operation (docs/design/computation.md#finalize), host execution
// space (Kokkos::DefaultHostExecutionSpace, implied). Same params as the CUDA path
// (core/ops/finalize_params.hpp), with host pointers. Every call checks its params (throws
// InputError naming the field) and fences before returning.

#include "core/ops/finalize_params.hpp"

#include <vector>

namespace moefin::reference {

/// out[t, h] = bf16( sum_{k = 0..K-1, perm != -1} w[t,k] * gemm_out[perm[t,k], h] ).
/// Summation order (what a CUDA kernel must do to match bit for bit): acc = 0.0f, then for
/// k = 0, 1, ..., K-1 in ascending order, skipping perm == -1: acc = acc + (w * x), the product
/// and the sum each rounded to fp32 (no fused multiply-add), w = 1 without weights; one
/// round-to-nearest-even to bf16 at the store. With bf16 weights the product is exact, so an FMA
/// gives the same bits; with fp32 weights it does not (use __fmul_rn/__fadd_rn to match).
void finalize(finalize::FinalizeParams const& p);

/// The same sum in double without the final rounding: the oracle tolerances are measured against.
std::vector<double> finalize_exact(finalize::FinalizeParams const& p);

/// DeepSeek-FP8 finalize. in_scales[row, h / 128] dequantizes each input; per token t and output
/// block b (columns [128 b, min(128 b + 128, H))):
///   acc[h]  = fp32 sum over k ascending of  w * (in_scales[perm, h/128] * x)  (each product and
///             sum rounded to fp32, in that order);
///   scale   = amax / 448 (fp32 division; amax = max |acc[h]| over the block), 1 when amax is 0;
///   out[t,h] = E4M3(acc[h] / scale)  (fp32 division, then round to nearest even, saturating to
///             +-448: core/fp8.hpp, as __nv_cvt_float_to_fp8(.., __NV_SATFINITE, __NV_E4M3));
///   out_scales[t, b] = scale, so that out * scale approximates the sum.
/// `out` is [T, H] bytes, `out_scales` [T, ceil(H / 128)].
void finalize_deepseek_fp8(finalize::FinalizeParams const& p);

/// The dequantized weighted sum of finalize_deepseek_fp8 in double, before quantization [T, H].
std::vector<double> finalize_deepseek_fp8_exact(finalize::FinalizeParams const& p);

} // namespace moefin::reference
