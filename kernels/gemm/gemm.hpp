#pragma once
// gemm::run — grouped GEMM over the permuted rows (bf16 tensor cores, fp32 accumulation).
// Host-visible header: no CUDA includes.
//
// Each warp owns one work item, (row tile of one expert, a slice of 32 or 16 output columns),
// and issues mma.sync m16n8k16 on operands loaded straight from global memory with 128-bit
// loads. Decode GEMMs are bound by reading each weight once: a warp issues the weight loads of
// several k steps before their first MMA (bytes in flight), weights bypass L1, and padding rows
// of the activations are not read. PDL: every read of routing output and of the activations
// follows the wait; Trigger::kDefault = implicit at exit.

#include "kernels/common/pdl_knobs.hpp"
#include "kernels/gemm/gemm_params.hpp"

#include <cstdint>

struct CUstream_st;

namespace moefin::gemm {

using Stream = CUstream_st*;

struct Policy {
  static constexpr int kThreads = 128; // 4 warps, each on its own work item
  static constexpr int kTileN = 64;    // n must be a multiple of this
  static constexpr int kStepK = 32;    // k per 128-bit load
  static constexpr int kCtasPerSm =
      2; // persistent grid: one resident wave, room for the rest of the chain
  /// Columns of one warp's work item: 32 for row tiles of 16 and 32, 16 above (accumulators).
  static constexpr int warp_cols(std::int64_t tile_m) { return tile_m <= 32 ? 32 : 16; }
  /// k steps whose loads a warp issues before the first MMA on them: 4 x 2 KiB of weights in
  /// flight per warp at tile 16, at most 128 registers per thread, so that GEMM1 and GEMM2 stay
  /// resident beside the rest of the chain at one CTA per SM.
  static constexpr int group_steps(std::int64_t tile_m) {
    return tile_m == 16 ? 4 : tile_m == 32 ? 2 : 1;
  }
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
