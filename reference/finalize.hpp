#pragma once
// Kokkos reference of the finalize operation (host execution space). Same params as the CUDA
// path (kernels/finalize/finalize_params.hpp), with host pointers.

#include "kernels/finalize/finalize_params.hpp"

#include <vector>

namespace moefin::reference {

/// out[t, h] = bf16( sum_{k = 0..K-1, perm != -1} w[t,k] * gemm_out[perm[t,k], h] ), the sum in
/// fp32 in ascending k, each product rounded to fp32 (the order the CUDA scalar kernel uses).
void finalize(finalize::FinalizeParams const& p);

/// The same sum in double without the final rounding: the oracle tolerances are measured against.
std::vector<double> finalize_exact(finalize::FinalizeParams const& p);

} // namespace moefin::reference
