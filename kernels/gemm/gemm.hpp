#pragma once
// gemm::run — grouped GEMM over the permuted rows (bf16 tensor cores, fp32 accumulation).
// Host-visible header: no CUDA includes.
//
// Each warp owns work items (row tile of one expert, 16 output columns) and issues mma.sync
// m16n8k16 on operands it copies with cp.async into its own slots of shared memory, several
// k steps ahead of the MMAs. Decode GEMMs are bound by reading each weight once: the copies
// bypass L1 (whose size the SM's carveout sets: a kernel that left an SM with the largest
// shared carveout would otherwise cap the bytes in flight), and padding rows of the activations
// are not read. PDL: every read of routing output and of the activations follows the wait;
// Trigger::kDefault = implicit at exit.

#include "core/ops/gemm_params.hpp"
#include "core/ops/pdl_knobs.hpp"
#include "kernels/finalize/fused_finalize.hpp"

#include <cstddef>
#include <cstdint>

struct CUstream_st;

namespace moefin::gemm {

using Stream = CUstream_st*;

struct Policy {
  static constexpr int kThreads = 128; // 4 warps, each on its own work items
  static constexpr int kWarpCols = 16; // output columns of one work item (two n8 tiles)
  static constexpr int kTileN = 64;    // n must be a multiple of this
  static constexpr int kStepK = 32;    // k per 16-byte copy of one thread
  static constexpr int kCtasPerSm =
      2; // persistent grid: one resident wave, room for the rest of the chain
  /// k steps per pipeline stage.
  static constexpr int group_steps(std::int64_t tile_m) { return tile_m <= 32 ? 2 : 1; }
  /// Stages per warp; stages - 1 are in flight while one is multiplied: at tile 16, 4 x 2 KiB
  /// of weights per warp.
  static constexpr int stages(std::int64_t tile_m) {
    return tile_m == 16 ? 5 : tile_m == 32 ? 4 : 3;
  }
  /// 16-byte slots per thread and stage: the weight rows, then the activation rows.
  static constexpr int slots(std::int64_t tile_m) {
    return group_steps(tile_m) * (kWarpCols / 8 + 2 * static_cast<int>(tile_m / 16));
  }
  /// Dynamic shared memory of a CTA (80 KiB at tile 16).
  static constexpr std::size_t smem_bytes(std::int64_t tile_m) {
    return static_cast<std::size_t>(stages(tile_m) * slots(tile_m)) * 16 * kThreads;
  }
};

/// Throws InputError: n a multiple of 64, k of 32, tile_m in {16, 32, 64, 128}, max_rows a
/// multiple of tile_m, ldc >= n and even, pointers set.
void validate(GroupedGemmParams const& p);
/// CTAs of the launch: one resident wave of `ctas_per_sm` (0: the policy's) per SM.
std::int64_t num_ctas(GroupedGemmParams const& p, int ctas_per_sm = 0);
void run(GroupedGemmParams const& p, PdlKnobs const& knobs, Stream stream);

/// What the kernel does besides the GEMM: nothing, clear the fused finalize's arrival counters
/// after its wait (GEMM1 of a fused layer), or the finalize reduction in its epilogue (GEMM2).
enum class Epilogue : int { kPlain = 0, kClearCounters, kFinalize };

/// GEMM2 with the finalize reduction in its epilogue (kernels/finalize/fused_finalize.hpp):
/// writes c and f.fin.out, counting on f.counters (cleared by the layer's GEMM1). Row tiles 16
/// and 32 only (the decode tiles). InputError when `f` does not describe this GEMM's output.
void validate_fused(GroupedGemmParams const& p, finalize::fused::FusedParams const& f);
void run_fused(GroupedGemmParams const& p, PdlKnobs const& knobs,
               finalize::fused::FusedParams const& f, Stream stream);
/// GEMM1 of a fused layer: the GEMM, and f.counters (counter_count(f.fin.num_tokens,
/// f.fin.hidden) of them) set to zero after its wait. Row tiles 16 and 32 only.
void run_clearing(GroupedGemmParams const& p, PdlKnobs const& knobs,
                  finalize::fused::FusedParams const& f, Stream stream);

/// Fills n bf16 values, seeded, uniform in +-[lo, hi] * scale (never zero for lo > 0), with a
/// hash of (seed, index) on the device: weights of GBs without a host copy.
void fill_random_bf16(void* dst, std::int64_t n, std::uint64_t seed, float lo, float hi,
                      float scale, Stream stream);

} // namespace moefin::gemm
