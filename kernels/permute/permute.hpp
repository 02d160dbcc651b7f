#pragma once
// permute::run — gathers hidden states into the permuted order (padding rows as zeros).
// Host-visible header: no CUDA includes.
//
// PDL: Trigger::kDefault = at entry, then the wait (the seed's permute kernel); every read of
// routing output (permuted_to_token, total_padded_rows) follows the wait.

#include "core/ops/pdl_knobs.hpp"
#include "core/ops/permute_params.hpp"

#include <cstdint>

struct CUstream_st;

namespace moefin::permute {

using Stream = CUstream_st*;

struct Policy {
  static constexpr int kThreads = 256;
  static constexpr int kCtasPerSm = 2; // grid-stride over rows in one resident wave
};

/// Throws InputError: hidden a multiple of 8 (128-bit rows), sizes positive, pointers set.
void validate(PermuteParams const& p);
/// CTAs of the launch: one resident wave of `ctas_per_sm` (0: the policy's) per SM.
std::int64_t num_ctas(PermuteParams const& p, int ctas_per_sm = 0);
void run(PermuteParams const& p, PdlKnobs const& knobs, Stream stream);

} // namespace moefin::permute
