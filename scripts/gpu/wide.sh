#!/usr/bin/env bash
# Two warp-stages per pipeline stage (`wide`, gemm::DecodeOptions::wide) beside the packed-value
# kernel it extends, on the GPU machine from the repository root (carry: .deps; prebuilt binaries
# of this commit: MOEFIN_PREBUILT=1 MOEFIN_PREBUILT_TARGETS="moefin test_decode_gpu
# test_chain_equivalence" scripts/device_prepare.sh, then the build takes seconds). One call per
# part, or WIDE_PART=all (the three in turn, within one call's 10 minutes).
#   WIDE_PART=gemm   scripts/gpu/gemm_bw.sh: test_decode_gpu (the wide kernels bit for bit the
#                    row-major one at every split, odd k slices included, both tiles, one and two
#                    CTAs per SM, every PDL knob), then `sweep gemm` of fp4 splitk at tiles 8 and
#                    16, T = 1, 4, 16, candidates wpack, cta2+wpack, wide, cta2+wide, wide+lean
#                    (checked against the reference first, all in the same interleaved rounds per
#                    tile; folder gemm); then the same with every launch at two CTAs per SM
#                    (--ctas-per-sm 2: splitk, wpack, wide and wide+lean, the last of which no
#                    candidate name can ask for beside cta2; folder gemm_cta2); then
#                    scripts/gpu/gemm.sh's sanitize phase (the four compute-sanitizer tools over
#                    the PDL-knob case, which runs the wide kernels too).
#   WIDE_PART=layer  scripts/gpu/fp4_scales.sh: test_chain_equivalence (the wide chain hashes as
#                    the packed chain at one and two CTAs per SM), then `sweep layer` fp4 at tile
#                    16, A-B-A: packed, wide, packed, each with its T = 1 timelines (--stamps=1);
#                    then the same at tile 8 without stamps.
#   WIDE_PART=ncu    scripts/gpu/ncu.sh phase gemm: Nsight Compute over the tile-8 fp4 GEMM,
#                    top-8 GEMM1, T = 1 and 16, cta2+wpack and cta2+wide beside splitk.
#   WIDE_PART=chain  (not in all; once wide is the chain's default) scripts/gpu/layer.sh's phases
#                    build test race layer layer-single peer: the GPU tests, the race benchmark
#                    cell, the whole layer sweep with the chain's defaults, its fp4 rows again
#                    launched single, and the PyTorch peer (folder sweep); then `moefin
#                    equivalence` of the fp4 chain, the three seed shapes, T = 1, 2, 4, 8, 16,
#                    seed-after and safe, 2,000 routings each (folder equivalence). Prebuilt
#                    targets: moefin test_decode_gpu test_chain_kernels test_chain_equivalence.
#   WIDE_PART=tiles  (not in all) the wide kernel on values whose warp-stages are contiguous
#                    (fp4::ValueLayout::kTiles, the `tiles` candidate, the chain's default since
#                    it was added): scripts/gpu/gemm_bw.sh with test_decode_gpu (the tiles kernels
#                    bit for bit the row-major one) and `sweep gemm` of fp4 at two CTAs per SM,
#                    tiles 8 and 16, T = 1, 2, 4, 8, 16, wide, tiles, wide+lean and tiles+lean in
#                    the same interleaved rounds (folder gemm_tiles); then
#                    scripts/gpu/fp4_scales.sh at tile 16: test_chain_equivalence (the tiles
#                    chain hashes as the packed one), `sweep layer` A-B-A wide, tiles, wide, T = 1
#                    timelines stamped (folder layer_tiles); then scripts/gpu/gemm.sh's sanitize
#                    phase (the PDL-knob case runs the tiles kernels too).
# In $OUT, per part: wide_<part>.tar.gz (the part's folders: logs, test outputs, result files,
# summaries) and wide_<part>_summary.txt; and wide_<WIDE_PART>_log.txt: 7 files for all.
# Variables: WIDE_PART (gemm, layer, ncu, chain, tiles or all).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
part=${WIDE_PART:-gemm}
out=${OUT:-out/wide}
mkdir -p "$out"
log=$out/wide_${part}_log.txt
: > "$log"
tag=wide
# shellcheck source=scripts/gpu/phases.sh
source scripts/gpu/phases.sh

# run_part PART: the part's scripts into folders of $out, then wide_PART.tar.gz (the folders)
# and wide_PART_summary.txt (their summaries).
run_part() {
  local dirs=()
  case $1 in
  gemm)
    dirs=(gemm gemm_cta2 sanitize)
    say "gemm_bw.sh: fp4 splitk, tiles 8 and 16, T = 1, 4, 16"
    OUT=$out/gemm GEMM_BW_BUDGET_S=150 GEMM_BW_TILES=8,16 GEMM_BW_TOKENS=1,4,16 \
      GEMM_BW_FORMATS=fp4 GEMM_BW_VARIANTS=splitk \
      GEMM_BW_CANDIDATES=wpack,cta2+wpack,wide,cta2+wide,wide+lean scripts/gpu/gemm_bw.sh \
      >> "$log" 2>&1
    say "gemm_bw.sh: exit $?"
    say "gemm_bw.sh: the same at two CTAs per SM"
    OUT=$out/gemm_cta2 GEMM_BW_PHASES="build sweep" GEMM_BW_BUDGET_S=100 GEMM_BW_TILES=8,16 \
      GEMM_BW_TOKENS=1,4,16 GEMM_BW_FORMATS=fp4 GEMM_BW_VARIANTS=splitk GEMM_BW_CTAS=2 \
      GEMM_BW_CANDIDATES=wpack,wide,wide+lean scripts/gpu/gemm_bw.sh >> "$log" 2>&1
    say "gemm_bw.sh (two CTAs per SM): exit $?"
    say "gemm.sh: sanitize"
    OUT=$out/sanitize GEMM_PHASES=sanitize GEMM_BUDGET_S=150 scripts/gpu/gemm.sh >> "$log" 2>&1
    say "gemm.sh: exit $?"
    ;;
  layer)
    dirs=(layer16 layer8)
    say "fp4_scales.sh: tile 16, packed wide packed, T = 1 stamped"
    OUT=$out/layer16 FP4_SCALES_TILE=16 FP4_SCALES_RUNS="packed wide packed" \
      FP4_SCALES_STAMPS=1 FP4_SCALES_BUDGET_S=200 FP4_SCALES_RESERVE_S=40 \
      scripts/gpu/fp4_scales.sh >> "$log" 2>&1
    say "fp4_scales.sh (tile 16): exit $?"
    say "fp4_scales.sh: tile 8, packed wide packed"
    OUT=$out/layer8 FP4_SCALES_TILE=8 FP4_SCALES_RUNS="packed wide packed" \
      FP4_SCALES_PHASES="build sweep" FP4_SCALES_BUDGET_S=120 FP4_SCALES_RESERVE_S=30 \
      scripts/gpu/fp4_scales.sh >> "$log" 2>&1
    say "fp4_scales.sh (tile 8): exit $?"
    ;;
  ncu)
    dirs=(ncu)
    say "ncu.sh: gemm, tile 8, cta2+wpack and cta2+wide"
    OUT=$out/ncu NCU_PHASES="build gemm" NCU_GEMM_TILE=8 NCU_GEMM_CANDIDATES=cta2+wpack,cta2+wide \
      NCU_BUDGET_S=100 scripts/gpu/ncu.sh >> "$log" 2>&1
    say "ncu.sh: exit $?"
    ;;
  chain)
    dirs=(sweep equivalence)
    say "layer.sh: build test race layer layer-single peer"
    OUT=$out/sweep LAYER_PHASES="build test race layer layer-single peer" LAYER_BUDGET_S=280 \
      scripts/gpu/layer.sh >> "$log" 2>&1
    say "layer.sh: exit $?"
    mkdir -p "$out/equivalence"
    say "equivalence: fp4, three shapes, T = 1..16, seed-after and safe, 2000 routings"
    timeout --signal=INT 200 build-device/moefin equivalence --shapes top-8,top-22,top-16 \
      --tokens 1,2,4,8,16 --presets seed-after,safe --weights-format fp4 --routings 2000 \
      --out "$out/equivalence/equivalence_fp4.h5" > "$out/equivalence/equivalence_log.txt" 2>&1
    say "equivalence: exit $?"
    build-device/moefin equivalence --print "$out/equivalence/equivalence_fp4.h5" \
      > "$out/equivalence/summary.txt" 2>&1
    ;;
  tiles)
    dirs=(gemm_tiles layer_tiles sanitize)
    say "gemm_bw.sh: fp4 splitk at two CTAs per SM, tiles 8 and 16, wide and tiles"
    OUT=$out/gemm_tiles GEMM_BW_BUDGET_S=190 GEMM_BW_TILES=8,16 GEMM_BW_TOKENS=1,2,4,8,16 \
      GEMM_BW_FORMATS=fp4 GEMM_BW_VARIANTS=splitk GEMM_BW_CTAS=2 \
      GEMM_BW_CANDIDATES=wide,tiles,wide+lean,tiles+lean scripts/gpu/gemm_bw.sh >> "$log" 2>&1
    say "gemm_bw.sh: exit $?"
    say "fp4_scales.sh: tile 16, wide tiles wide, T = 1 stamped"
    OUT=$out/layer_tiles FP4_SCALES_TILE=16 FP4_SCALES_RUNS="wide tiles wide" \
      FP4_SCALES_STAMPS=1 FP4_SCALES_BUDGET_S=230 \
      FP4_SCALES_RESERVE_S=50 scripts/gpu/fp4_scales.sh >> "$log" 2>&1
    say "fp4_scales.sh: exit $?"
    say "gemm.sh: sanitize"
    OUT=$out/sanitize GEMM_PHASES=sanitize GEMM_BUDGET_S=150 scripts/gpu/gemm.sh >> "$log" 2>&1
    say "gemm.sh: exit $?"
    ;;
  *)
    say "WIDE_PART '$1' is none of gemm, layer, ncu, chain, tiles, all"
    exit 2
    ;;
  esac
  pack_part "$1" "${dirs[@]}"
}

if [[ $part == all ]]; then
  for p in gemm layer ncu; do run_part $p; done
else
  run_part "$part"
fi
