#pragma once
// Geometry of the split-K decode GEMM (kernels/gemm/decode.hpp): its policy constants and the
// choice of how many warps of a CTA share one unit's k range. The device runs plan_split on the
// tile count routing wrote (every CTA gets the same answer); the host runs the same function to
// record and test the choice. Host-visible, no CUDA headers.

#include "core/ops/decode_gemm_params.hpp"
#include "core/router_scores.hpp" // MOEFIN_HD

#include <cstddef>
#include <cstdint>

namespace moefin::gemm {

struct DecodePolicy {
  static constexpr int kThreads = 256; // 8 warps
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kM16 = 2; // m16 tiles (32 weight rows = output columns) per warp
  static constexpr int kWarpRows = 16 * kM16;
  static constexpr int kCtasPerSm = 1; // the resident wave: one CTA of 8 warps per SM
  /// k of one pipeline stage of a warp: every lane copies 16 bytes of each of its 4 weight rows
  /// (8 bf16 or 32 e2m1 values).
  MOEFIN_HD static constexpr int step_k(WeightFormat f) {
    return f == WeightFormat::kFp4 ? 128 : 32;
  }
  /// Stages per warp, stages - 1 in flight: 4 x 2 KiB of weights (+ 256 B of fp4 scales) per
  /// warp, 64-72 KiB per SM, about the bandwidth-latency product of an H200 SM.
  static constexpr int stages(WeightFormat) { return 5; }
  /// Stages of the `deep` launch (DecodeOptions::deep, fp4 at tile 16): 8 x 2.25 KiB in flight
  /// per warp, twice the default, in 187 KiB of shared memory (one CTA per SM).
  static constexpr int kDeepStages = 9;
  /// Shared memory of one warp's stage: weights, then (fp4) the scales.
  static constexpr int stage_bytes(WeightFormat f) {
    return kM16 * 2 * 16 * 32 + (f == WeightFormat::kFp4 ? kM16 * 4 * 32 : 0);
  }
  /// n8 token tiles of a row tile.
  static constexpr int token_tiles(std::int64_t tile_m) { return static_cast<int>(tile_m / 8); }
  /// Dynamic shared memory of a CTA: the warps' stages, a word per lane and stage of unit
  /// metadata (expert, real token rows), and the fp32 partial sums the k-split warps combine
  /// (111 KiB for fp4 at tile 16: two CTAs, of this GEMM and of the kernel after it, fit on
  /// one SM); `depth` > 0 replaces stages(f) (kDeepStages: 187 KiB).
  static constexpr std::size_t smem_bytes(WeightFormat f, std::int64_t tile_m, int depth = 0) {
    return static_cast<std::size_t>(kWarps) *
           (static_cast<std::size_t>(depth > 0 ? depth : stages(f)) * (stage_bytes(f) + 128) +
            32u * static_cast<std::size_t>(kM16 * token_tiles(tile_m) * 4) * 4u);
  }
};

/// The launch's run-time choices beside the params, one kernel parameter (so that the audit's
/// layout names them: launch.forced_ks, launch.weights_before_wait, launch.plan_grid).
struct DecodeLaunch {
  std::int32_t forced_ks = 0;           // DecodeOptions::split_k
  std::int32_t weights_before_wait = 0; // DecodeOptions::weights_before_wait
  // The grid plan_split plans for (0: the launched one). A launch of fewer CTAs than the
  // resident wave plans as the wave does, so every unit is summed in the same order and the
  // output keeps its bits whatever the grid (CTAs take the units round robin).
  std::int32_t plan_grid = 0;
};

/// How one launch divides its work: a unit is (row tile, block of `groups` x 32 weight rows);
/// the 8 warps of a CTA are `groups` row groups x `ks` k slices, the ks partial sums of a row
/// group are added in shared memory in slice order (deterministic). CTAs take units round robin.
struct DecodeSplit {
  int ks = 0;                  // 0: no valid split (a forced ks that does not divide the steps)
  int groups = 0;              // 8 / ks
  std::int64_t row_blocks = 0; // units per row tile: ceil(n / (32 groups))
  std::int64_t units = 0;
  std::int64_t waves = 0; // ceil(units / grid): units the busiest CTA runs
};

/// The split of `tiles` row tiles over `grid` CTAs: the ks in {1, 2, 4, 8} dividing the k steps
/// (k / step_k) with the least estimated time, waves * (steps / ks) plus a quarter step per wave
/// for the combine when ks > 1; ties to the smaller ks. `forced_ks` > 0 takes that ks (ks 0 when
/// it does not divide the steps).
MOEFIN_HD DecodeSplit plan_split(std::int64_t tiles, std::int64_t n, std::int64_t k, WeightFormat f,
                                 std::int64_t grid, int forced_ks = 0) {
  std::int64_t const steps = k / DecodePolicy::step_k(f);
  DecodeSplit best;
  std::int64_t best_cost = -1;
  for (int ks = 1; ks <= DecodePolicy::kWarps; ks *= 2) {
    if (steps % ks != 0 || (forced_ks > 0 && ks != forced_ks))
      continue;
    DecodeSplit s;
    s.ks = ks;
    s.groups = DecodePolicy::kWarps / ks;
    std::int64_t const rows = static_cast<std::int64_t>(s.groups) * DecodePolicy::kWarpRows;
    s.row_blocks = (n + rows - 1) / rows;
    s.units = tiles * s.row_blocks;
    s.waves = grid > 0 ? (s.units + grid - 1) / grid : 0;
    std::int64_t const cost = s.waves * 4 * (steps / ks) + (ks > 1 ? s.waves : 0);
    if (best_cost < 0 || cost < best_cost) {
      best = s;
      best_cost = cost;
    }
  }
  return best;
}

} // namespace moefin::gemm
