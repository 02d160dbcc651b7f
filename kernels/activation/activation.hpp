#pragma once
// activation::run — SwiGLU or ReLU^2 between the two grouped GEMMs, rows < total_padded_rows.
// Host-visible header: no CUDA includes.
//
// PDL: Trigger::kDefault = at entry, then the wait (the seed's activation kernel).

#include "core/ops/activation_params.hpp"
#include "core/ops/pdl_knobs.hpp"

#include <cstdint>

struct CUstream_st;

namespace moefin::activation {

using Stream = CUstream_st*;

struct Policy {
  static constexpr int kThreads = 256;
  static constexpr int kCtasPerSm = 2; // grid-stride over rows in one resident wave
};

/// Throws InputError: inter a multiple of 8, sizes positive, pointers set.
void validate(ActivationParams const& p);
/// CTAs of the launch: one resident wave of `ctas_per_sm` (0: the policy's) per SM.
std::int64_t num_ctas(ActivationParams const& p, int ctas_per_sm = 0);
void run(ActivationParams const& p, PdlKnobs const& knobs, Stream stream);

} // namespace moefin::activation
