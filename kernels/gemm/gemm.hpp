#pragma once
// gemm::run — grouped GEMM over the permuted rows (bf16 tensor cores, fp32 accumulation).
// Host-visible header: no CUDA includes.
//
// One CTA per (row tile of one expert, 64 output columns); warps own 16 columns each and issue
// mma.sync m16n8k16 on operands loaded straight from global memory with 128-bit loads (decode
// GEMMs are bound by reading the weights once). PDL: every read of routing output and of the
// activations follows the wait; Trigger::kDefault = implicit at exit.

#include "kernels/common/pdl_knobs.hpp"
#include "kernels/gemm/gemm_params.hpp"

#include <cstdint>

struct CUstream_st;

namespace moefin::gemm {

using Stream = CUstream_st*;

struct Policy {
  static constexpr int kThreads = 128; // 4 warps
  static constexpr int kTileN = 64;    // columns per CTA
  static constexpr int kStepK = 32;    // k per 128-bit load
  static constexpr int kCtasPerSm =
      2; // persistent grid: one resident wave, room for the rest of the chain
};

/// Throws InputError: n a multiple of 64, k of 32, tile_m in {16, 32, 64, 128}, max_rows a
/// multiple of tile_m, ldc >= n and even, pointers set.
void validate(GroupedGemmParams const& p);
/// CTAs of the launch: one resident wave of `ctas_per_sm` (0: the policy's) per SM.
std::int64_t num_ctas(GroupedGemmParams const& p, int ctas_per_sm = 0);
void run(GroupedGemmParams const& p, PdlKnobs const& knobs, Stream stream);

/// Fills n bf16 values, seeded, uniform in +-[lo, hi] * scale (never zero for lo > 0), with a
/// hash of (seed, index) on the device: weights of GBs without a host copy.
void fill_random_bf16(void* dst, std::int64_t n, std::uint64_t seed, float lo, float hi,
                      float scale, Stream stream);

} // namespace moefin::gemm
