#pragma once
// Kokkos reference of the grouped GEMM over permuted rows, host execution space (implied). Same
// params as the CUDA kernel (core/ops/gemm_params.hpp), host pointers; `total_padded_rows`
// points to a host int.

#include "core/ops/gemm_params.hpp"

namespace moefin::reference {

/// c[r, j] = bf16( sum_i a[r, i] * b[x, j, i] ), x = cta_to_expert[r / tile_m], for
/// r < *total_padded_rows and j < n. The sum is in double (each bf16 product is exact, so the
/// only error is the summation's, far below the CUDA kernel's fp32 accumulation), rounded to fp32
/// and then to bf16 (round to nearest even). Columns [n, ldc) and rows from *total_padded_rows on
/// are not touched, nor are the rows of a tile whose expert is -1.
void grouped_gemm(gemm::GroupedGemmParams const& p);

} // namespace moefin::reference
