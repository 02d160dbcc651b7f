#!/usr/bin/env bash
# The layer chain with fp4 weights in different layouts, A-B-A, on the GPU machine, from the
# repository root (carry: .deps; prebuilt binaries: MOEFIN_PREBUILT=1 scripts/device_prepare.sh).
# About 3-4 minutes after the build. Layouts: rowmajor (scales row-major, values as nibbles),
# tiled (scales in 16 x 128 tiles: the chain's default since 2026-12-05), packed (tiled scales
# and each values word bit-permuted: fp4::pack_word; GEMMs launched with one warp-stage per
# pipeline stage, --fp4-gemm single), wide (packed, and the GEMMs launched with two: --fp4-gemm
# wide, the chain's default since 2026-12-05), tiles (packed words in warp-stage tiles,
# fp4::ValueLayout::kTiles, launched wide). Correctness first: test_chain_equivalence
# (its fp4 case: the tiled and packed chains' buffers hash as the row-major chain's at tile 8 and
# 16, T = 1, 4, 16, PDL on and off, and the output is within the reference's tolerance; and the
# rest of the chain's gpu test). Then `sweep layer`, fp4 only, at tile FP4_SCALES_TILE (default
# 8), once per entry of FP4_SCALES_RUNS in that order (default "rowmajor tiled rowmajor": A-B-A,
# so that a drift of the GPU between the runs shows). In $OUT:
#   fp4_scales_log.txt     everything printed, "done: PHASE" per finished phase
#   chain_test.txt         build-device/tests/test_chain_equivalence
#   layer_<layout>_<i>.h5  the sweeps, i = 1, 2, .. in run order (attributes fp4_scales,
#                          fp4_values and fp4_gemm name the layout)
#   summary.txt            the sweeps' tables
# Variables: FP4_SCALES_BUDGET_S (default 240) seconds after the build; FP4_SCALES_RESERVE_S
# (default 60) seconds of it each run leaves to each run after it; FP4_SCALES_TOKENS (default
# 1,4,16); FP4_SCALES_RUNS; FP4_SCALES_PHASES (default: build test sweep); FP4_SCALES_STAMPS
# (default none: no stamps; else --stamps=THAT, e.g. 1: each run's T = 1 timelines).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-out/fp4_scales}
budget=${FP4_SCALES_BUDGET_S:-240}
phases=${FP4_SCALES_PHASES:-build test sweep}
tokens=${FP4_SCALES_TOKENS:-1,4,16}
tile=${FP4_SCALES_TILE:-8}
read -r -a runs <<< "${FP4_SCALES_RUNS:-rowmajor tiled rowmajor}"
reserve=${FP4_SCALES_RESERVE_S:-60}
mkdir -p "$out"
log=$out/fp4_scales_log.txt
touch "$log"
tag=fp4_scales
# shellcheck source=scripts/gpu/phases.sh
source scripts/gpu/phases.sh
start_log
args=(sweep layer --tokens "$tokens" --weights-format fp4 --tile-m "$tile")
[[ ${FP4_SCALES_STAMPS:-none} != none ]] && args+=(--stamps="$FP4_SCALES_STAMPS")
for phase in $phases; do
  case $phase in
  build)
    build_phase "moefin test_chain_equivalence"
    ;;
  test)
    test_phase test_chain_equivalence "$out/chain_test.txt"
    ;;
  sweep)
    # A bad flag stops here, on any host.
    "$bin" "${args[@]}" --list > /dev/null 2>> "$log" || { say "sweep: flags refused"; continue; }
    # Each run keeps `reserve` seconds of the budget for each run after it (sweep layer has no
    # time limit of its own; a SIGINT at the limit keeps its finished rows).
    n=$((${#runs[@]} - 1))
    i=1
    for layout in "${runs[@]}"; do
      case $layout in
      rowmajor) flags=(--fp4-scales rowmajor --fp4-values nibbles) ;;
      tiled) flags=(--fp4-scales tiled --fp4-values nibbles) ;;
      packed) flags=(--fp4-scales tiled --fp4-values packed --fp4-gemm single) ;;
      wide) flags=(--fp4-scales tiled --fp4-values packed --fp4-gemm wide) ;;
      tiles) flags=(--fp4-scales tiled --fp4-values tiles --fp4-gemm wide) ;;
      *)
        say "unknown layout '$layout' in FP4_SCALES_RUNS (rowmajor, tiled, packed, wide, tiles)"
        i=$((i + 1)) n=$((n - 1))
        continue
        ;;
      esac
      run "sweep-${layout}_$i" 30 $((reserve * n)) "$bin" "${args[@]}" "${flags[@]}" \
        --out "$out/layer_${layout}_$i.h5" && mark_done "sweep-${layout}_$i"
      i=$((i + 1)) n=$((n - 1))
    done
    ;;
  *)
    say "unknown phase '$phase'"
    ;;
  esac
done
{
  i=1
  for layout in "${runs[@]}"; do
    f=$out/layer_${layout}_$i.h5
    i=$((i + 1))
    [[ -f $f ]] || { echo "== ${f##*/}: not written (log says why)"; continue; }
    echo "== ${f##*/}"
    "$bin" sweep layer --print "$f"
  done
} > "$out/summary.txt" 2>&1
say "finished; done: $(sed -n 's/^done: //p' "$log" | tr '\n' ' ')"
exit 0
