#!/usr/bin/env bash
# Packed fp4 values (`wpack`) and tiled scales at both routing tiles, and the committed layer sweep
# again, measured on the GPU machine from the repository root (carry: .deps; prebuilt binaries of
# this commit: MOEFIN_PREBUILT=1 scripts/device_prepare.sh, then the build takes seconds). One call
# per part, or WPACK_PART=all (the three in turn: 166 s on the H200) in one call under its
# 10-minute limit.
#   WPACK_PART=gemm  (90 s on an H100) scripts/gpu/gemm_bw.sh: test_decode_gpu (the packed and tiled
#                    kernels bit for bit the row-major one, every split, both tiles, two CTAs
#                    per SM, every PDL knob), then `sweep gemm` of fp4 splitk at tiles 8 and 16,
#                    T = 1, 4, 16, candidates tscale, wpack, cta2+tscale, cta2+wpack (checked
#                    against the reference first, all in the same interleaved rounds per tile);
#                    then scripts/gpu/gemm.sh's sanitize phase (the four compute-sanitizer
#                    tools over the PDL-knob case, which runs the wpack kernels too).
#   WPACK_PART=layer (18 s on an H100) scripts/gpu/fp4_scales.sh at tile 16: test_chain_equivalence
#                    (the tiled and packed chains hash as the row-major chain), then `sweep
#                    layer` fp4 A-B-C-B-A: rowmajor, tiled, packed, tiled, rowmajor; then at tile
#                    8 tiled, packed, tiled.
#   WPACK_PART=sweep (at most 260 s) scripts/gpu/layer.sh's phases build test race layer
#                    layer-nibbles peer: the GPU tests, the race benchmark cell, the whole layer
#                    sweep (three seed shapes, T = 1..128, bf16 and fp4 with the chain's default
#                    layouts: tiled scales, packed values), its fp4 rows again with the values as
#                    nibbles, and the PyTorch peer.
# In $OUT, per part: wpack_<part>.tar.gz (the part's folders: their logs, test outputs, result
# files and summaries) and wpack_<part>_summary.txt (their summaries); and wpack_<WPACK_PART>_log.txt
# (this script's lines and the parts' logs): 3 files for one part, 7 for all (the tool takes back
# 8). Variables: WPACK_PART (gemm, layer, sweep or all).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
part=${WPACK_PART:-gemm}
out=${OUT:-out/wpack}
mkdir -p "$out"
log=$out/wpack_${part}_log.txt
: > "$log"
tag=wpack
# shellcheck source=scripts/gpu/phases.sh
source scripts/gpu/phases.sh

# run_part PART: the part's scripts into folders of $out, then wpack_PART.tar.gz (the folders)
# and wpack_PART_summary.txt (their summaries).
run_part() {
  local dirs=()
  case $1 in
  gemm)
    dirs=(gemm sanitize)
    say "gemm_bw.sh: fp4 splitk, tiles 8 and 16, T = 1, 4, 16"
    OUT=$out/gemm GEMM_BW_BUDGET_S=240 GEMM_BW_TILES=8,16 GEMM_BW_TOKENS=1,4,16 \
      GEMM_BW_VARIANTS=splitk GEMM_BW_CANDIDATES=tscale,wpack,cta2+tscale,cta2+wpack \
      scripts/gpu/gemm_bw.sh >> "$log" 2>&1
    say "gemm_bw.sh: exit $?"
    say "gemm.sh: sanitize"
    OUT=$out/sanitize GEMM_PHASES=sanitize GEMM_BUDGET_S=200 scripts/gpu/gemm.sh >> "$log" 2>&1
    say "gemm.sh: exit $?"
    ;;
  layer)
    dirs=(layer16 layer8)
    say "fp4_scales.sh: tile 16, rowmajor tiled packed tiled rowmajor"
    OUT=$out/layer16 FP4_SCALES_TILE=16 FP4_SCALES_RUNS="rowmajor tiled packed tiled rowmajor" \
      FP4_SCALES_BUDGET_S=300 FP4_SCALES_RESERVE_S=45 scripts/gpu/fp4_scales.sh >> "$log" 2>&1
    say "fp4_scales.sh (tile 16): exit $?"
    say "fp4_scales.sh: tile 8, tiled packed tiled"
    OUT=$out/layer8 FP4_SCALES_TILE=8 FP4_SCALES_RUNS="tiled packed tiled" \
      FP4_SCALES_PHASES="build sweep" FP4_SCALES_BUDGET_S=150 FP4_SCALES_RESERVE_S=40 \
      scripts/gpu/fp4_scales.sh >> "$log" 2>&1
    say "fp4_scales.sh (tile 8): exit $?"
    ;;
  sweep)
    dirs=(sweep)
    say "layer.sh: build test race layer layer-nibbles peer"
    OUT=$out/sweep LAYER_PHASES="build test race layer layer-nibbles peer" LAYER_BUDGET_S=260 \
      scripts/gpu/layer.sh >> "$log" 2>&1
    say "layer.sh: exit $?"
    ;;
  *)
    say "WPACK_PART '$1' is none of gemm, layer, sweep, all"
    exit 2
    ;;
  esac
  pack_part "$1" "${dirs[@]}"
}

if [[ $part == all ]]; then
  for p in gemm layer sweep; do run_part $p; done
else
  run_part "$part"
fi
