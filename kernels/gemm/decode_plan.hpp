#pragma once
// Geometry of the split-K decode GEMM (kernels/gemm/decode.hpp): its policy constants and the
// choice of how many warps of a CTA share one unit's k range. The device runs plan_split on the
// tile count routing wrote (every CTA gets the same answer); the host runs the same function to
// record and test the choice. Host-visible, no CUDA headers.

#include "core/fp4.hpp"
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
  /// The `wide` launch (DecodeOptions::wide, packed fp4 values): kWideWidth warp-stages per
  /// pipeline stage. At one CTA per SM 3 stages, two in flight: 4 x 2.25 KiB per warp as the
  /// default launch, in 119-127 KiB per CTA; at two or more (cta2) 2 stages, one in flight (half
  /// the default), so that two CTAs fit on an SM at either tile: 82-90 KiB per CTA.
  static constexpr int kWideWidth = 2;
  static constexpr int wide_stages(int ctas_per_sm) { return ctas_per_sm >= 2 ? 2 : 3; }
  /// Shared memory of one warp's stage: weights, then (fp4) the scales.
  static constexpr int stage_bytes(WeightFormat f) {
    return kM16 * 2 * 16 * 32 + (f == WeightFormat::kFp4 ? kM16 * 4 * 32 : 0);
  }
  /// n8 token tiles of a row tile.
  static constexpr int token_tiles(std::int64_t tile_m) { return static_cast<int>(tile_m / 8); }
  /// Dynamic shared memory of a CTA: the warps' stages, a word per lane and stage of unit
  /// metadata (expert, real token rows), and the fp32 partial sums the k-split warps combine
  /// (111 KiB for fp4 at tile 16: two CTAs, of this GEMM and of the kernel after it, fit on
  /// one SM); `depth` > 0 replaces stages(f) (kDeepStages: 187 KiB), `width` warp-stages per
  /// stage (kWideWidth).
  static constexpr std::size_t smem_bytes(WeightFormat f, std::int64_t tile_m, int depth = 0,
                                          int width = 1) {
    return static_cast<std::size_t>(kWarps) *
           (static_cast<std::size_t>(depth > 0 ? depth : stages(f)) *
                (static_cast<std::size_t>(width) * stage_bytes(f) + 128) +
            32u * static_cast<std::size_t>(kM16 * token_tiles(tile_m) * 4) * 4u);
  }
};

/// Where the fp4 scales of one warp's pipeline stage come from: DecodePolicy::kM16 tiles of 16
/// rows x 128 k, 128 bytes each, copied into the stage's shared memory in the order of
/// fp4::tiled_byte whatever the layout in global memory (the GEMM's lane (g, q) then reads word
/// 4 g + (q & 2) + h of tile m: rows 16 m + g + 8 h, blocks 2 q and 2 q + 1 in its halves).
/// `row0` is the unit's first weight row over [experts][n] (expert * n + its row base, a
/// multiple of 32), `k0` the first k of the warp's k slice (a multiple of 128); stage s of the
/// slice reads `stage_advance` * s bytes further.
struct ScaleStaging {
  /// kRowMajor: every lane (g, q) copies 4 bytes of each tile m (its word 32 m + lane): row
  /// 16 m + g + 8 (q & 1), blocks 4 (q >> 1) .. 4 (q >> 1) + 3 of the stage; `row_g` is the
  /// lane's row row0 + g, tile m lies m k bytes further. (fp4::scale_offset's row-major formula,
  /// written as the kernel always had it: the default kernels' code stays the same.)
  MOEFIN_HD static std::int64_t rowmajor_src(std::int64_t row_g, int k0, std::int64_t k, int q) {
    return (row_g + 8 * (q & 1)) * (k / fp4::kBlock) + k0 / fp4::kBlock + 4 * (q >> 1);
  }
  /// kTiled: lanes 0 .. kTiledLanes - 1 copy 16 contiguous bytes each, chunk lane % 8 of tile
  /// lane / 8, into the stage's 16-byte chunk `lane`.
  static constexpr int kTiledLanes = DecodePolicy::kM16 * fp4::kTileBytes / 16;
  MOEFIN_HD static std::int64_t tiled_src(std::int64_t row0, int k0, std::int64_t k, int lane) {
    return fp4::scale_offset(fp4::ScaleLayout::kTiled, row0 + fp4::kTileRows * (lane >> 3),
                             k0 / fp4::kBlock, k) +
           16 * (lane & 7);
  }
  MOEFIN_HD static constexpr int stage_advance(fp4::ScaleLayout l) {
    return l == fp4::ScaleLayout::kTiled ? fp4::kTileBytes : fp4::kTileK / fp4::kBlock;
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
