#pragma once
// Kokkos reference of the activation between the grouped GEMMs, host execution space (implied).
// Same params as the CUDA kernel (core/ops/activation_params.hpp), host pointers;
// `total_padded_rows` points to a host int.

#include "core/ops/activation_params.hpp"

namespace moefin::reference {

/// For r < *total_padded_rows, j < inter:
///   SwiGLU: out[r, j] = silu(g) * u, g = in[r, j], u = in[r, inter + j], silu(g) = g / (1 + e^-g)
///   ReLU^2: out[r, j] = max(in[r, j], 0)^2
/// computed in double, rounded to fp32 and then to bf16 (round to nearest even). ReLU^2 of a bf16
/// value is exact in fp32, so that variant is bit-exact with any fp32 kernel.
void activation(activation::ActivationParams const& p);

} // namespace moefin::reference
