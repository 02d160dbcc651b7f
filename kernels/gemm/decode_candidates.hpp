#pragma once
// Candidate launch policies of the split-K decode GEMM (kernels/gemm/decode.hpp) that `moefin
// sweep gemm --candidates` times beside the current variants, so that one GPU run says which
// policy streams the weights closest to the copy bandwidth. A candidate is a '+'-joined set of
// knobs over the kernel's run-time options, no extra template copies:
//   ks1, ks2, ks4, ks8  force the k split (DecodeOptions::split_k) instead of plan_split's choice
//   cta2                two CTAs of 8 warps per SM (16 warps: twice the weight bytes in flight
//                       and four warps per scheduler to hide the dequantization's dependences)
//   deep                fp4 at tile 16: DecodePolicy::kDeepStages stages, twice the weight bytes
//                       in flight per warp with the same 8 warps (DecodeOptions::deep; one CTA
//                       per SM, so not with cta2 or loads)
//   loads               the loads-only diagnostic (DecodeOptions::loads_only, tile 16, isolated)
//   tscale              fp4 scales stored in 16 x 128 tiles (fp4::ScaleLayout::kTiled), staged
//                       with 16-byte copies: 2 x 128 contiguous bytes per warp and stage instead
//                       of 64 4-byte copies from 32 rows (a data layout, set in the params:
//                       candidate_layout; not with deep or loads)
//   lean                with tscale only: the activations' address formed once per unit, loads
//                       at immediate offsets, padding rows' lanes keep stale registers instead
//                       of zeroing them, scales placed as bf16 bits instead of converted
//                       (DecodeOptions::lean)
//   wpack               tscale, and the fp4 values' words stored bit-permuted
//                       (fp4::ValueLayout::kPacked): 8 integer instructions turn a word into
//                       its 4 bf16 pairs instead of 13 (a data layout like tscale:
//                       candidate_value_layout; it names tscale itself, and lean may join it)
//   wide                wpack with two warp-stages per pipeline stage (DecodeOptions::wide):
//                       a stage's fixed work paid once per two, one stage in flight; it names
//                       wpack itself (cta2+wide+lean is longer than a name may be)
//   tiles               wide on values whose warp-stages are contiguous (fp4::ValueLayout::
//                       kTiles): each warp streams its k slice as one run of bytes instead of
//                       64-byte pieces of 32 rows (a data layout; it names wide itself)
// The chain (core/ops/layer_plan.hpp) keeps the current policy. Host-only, no CUDA.

#include "kernels/gemm/decode.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace moefin::gemm {

struct DecodeCandidate {
  std::string name;    // "sk+" and the knobs in canonical order (loads, cta2, deep, tscale,
                       // wpack or wide, lean, ks):
                       // the variant column of /gemm_sweep and /gemm_check
  int split_k = 0;     // 0: plan_split's choice
  int ctas_per_sm = 0; // 0: the sweep's --ctas-per-sm
  bool loads_only = false;
  bool deep = false;
  bool tiled_scales = false;
  bool packed_values = false; // wpack (with tiled_scales)
  bool wide = false;          // wide (with packed_values)
  bool tiled_values = false;  // tiles (with wide)
  bool lean = false;
};

/// The longest candidate name (the variant columns of the sweep's tables hold 15 characters).
inline constexpr std::size_t kMaxCandidateName = 15;

/// Parses one spec ("cta2+ks8"); throws InputError naming `flag` for an unknown or repeated
/// knob, two splits, deep with cta2 or loads, an empty spec or a name longer than
/// kMaxCandidateName.
DecodeCandidate parse_candidate(std::string const& spec, std::string const& flag);
/// A comma-separated list of specs, or "none" (empty); the same candidate twice is an error.
std::vector<DecodeCandidate> parse_candidates(std::string const& list, std::string const& flag);

/// Empty when the candidate can run this GEMM, else why not (a forced split that does not
/// divide the k steps, loads or deep at a tile other than 16, deep on bf16 weights): the sweep
/// skips it there and says so.
std::string candidate_skip_reason(DecodeCandidate const& c, WeightFormat f, std::int64_t k,
                                  std::int64_t tile_m);

/// The options of a candidate launch over `base` (the sweep's mode and carveout).
DecodeOptions candidate_options(DecodeCandidate const& c, DecodeOptions base);
/// The fp4 scale layout a candidate's weights are stored in (DecodeGemmParams::scale_layout).
inline fp4::ScaleLayout candidate_layout(DecodeCandidate const& c) {
  return c.tiled_scales ? fp4::ScaleLayout::kTiled : fp4::ScaleLayout::kRowMajor;
}
/// The fp4 value layout a candidate's weights are stored in (DecodeGemmParams::value_layout).
inline fp4::ValueLayout candidate_value_layout(DecodeCandidate const& c) {
  return c.tiled_values    ? fp4::ValueLayout::kTiles
         : c.packed_values ? fp4::ValueLayout::kPacked
                           : fp4::ValueLayout::kNibbles;
}

/// The candidates of scripts/gpu/gemm_bw.sh: every split, two CTAs per SM with the plan's split
/// and with the two deepest splits, the deep fp4 pipeline, the tiled fp4 scales alone and with
/// two CTAs per SM, with lean loads, the packed fp4 values alone and with two CTAs per SM, the
/// same with two warp-stages per stage, on row-major and on tiled values, and the loads-only
/// diagnostic with two CTAs per SM.
inline constexpr char const* kDefaultCandidates =
    "ks1,ks2,ks4,ks8,cta2,cta2+ks4,cta2+ks8,deep,tscale,cta2+tscale,tscale+lean,wpack,cta2+wpack,"
    "wide,cta2+wide,cta2+tiles,loads+cta2";

} // namespace moefin::gemm
