#!/usr/bin/env bash
# The finalize inside GEMM2 (variant fused, issue 15) on the GPU machine, from the repository
# root with .deps carried: correctness first, then the race cells, then the layer times. Every run
# is moefin's chain on the tiled bf16 GEMMs (--flavour moefin --weights-format bf16-tiled: the
# only ones the fused finalize runs with). In $OUT:
#   fused_log.txt            everything printed: each command and its output, the sizing of the
#                            equivalence run and of the layer sweep, the summary (last)
#   fused_gpu_test.txt       build-device/tests/test_fused_gpu --log_level=test_suite: fused vs the
#                            separate scalar finalize bitwise and vs the reference chain (K = 1, 8,
#                            22, 64; PDL on and off; poisoned counters), GEMM2 alone with dropped
#                            experts
#   fused_equivalence.h5     moefin equivalence --set finalize.variant=fused: the three seed
#                            shapes at T = 1 and 16, presets seed-after and all-early, PDL on vs
#                            off bitwise in every buffer, the output against the Kokkos reference
#                            chain; FUSED_ROUTINGS routings per shape (default 10000), fewer when
#                            the rate a pilot run measured says they do not fit (the log says how
#                            many ran, the summary counts them per shape)
#   fused_race.h5            moefin race --finalize fused: top-8 at T = 16, presets seed-after and
#                            all-early (each kernel's placements one at a time), metadata before
#                            the wait, 25 us delay in routing, the verifier's verdict per cell
#   fused_race_separate.h5   the same cells with the separate finalize (new), for contrast
#   fused_layer.h5           moefin sweep layer --finalize new,fused: the three seed shapes at
#                            T = 1, 2, 4, 8, 16 (fewer when the pilot says they do not fit), fused
#                            vs GEMM2 + the dispatcher's separate finalize (new) and the previous
#                            one, seed-after and seed-before, in the same interleaved rounds
#   fused_timeline.h5        moefin sweep layer --stamps: top-8, T = 1, new and fused (and
#                            previous), the per-CTA timeline of each one's last layer
# Variables: FUSED_BUDGET_S seconds of runs after the build (default 210; a phase that does not fit
# is skipped with a line in the log), FUSED_ROUTINGS (10000), FUSED_TOKENS (the sweep's token
# counts; default the first of 1,2,4,8,16, 1,4,16 and 1,16 that the pilot says fits),
# FUSED_ROUNDS (15), FUSED_LAYERS (16).
# Time: the build (scripts/device_build.sh: seconds with the prebuilt binaries of
# MOEFIN_PREBUILT=1 scripts/device_prepare.sh, which include test_fused_gpu; 2-3 minutes from
# scratch) plus at most FUSED_BUDGET_S (3.5 minutes; about 4 minutes in all): gpu test <= 45 s,
# equivalence pilot <= 15 s, equivalence <= 65 s, race cells <= 30 s each, layer pilot <= 20 s,
# timeline <= 20 s, the layer sweep what is left (~20-40 s measured on an H200 for 90 rows).
# Read: the summary at the end of fused_log.txt (scripts/gpu/fused_summary.py over the files:
# FAIL / CONTRADICTS lines and exit 1 mark a correctness problem; the layer lines give new/fused
# per (shape, T, placement), > 1 where the fused layer is faster; the timeline lines each kernel's
# first start / first wait / last end); `moefin sweep layer --print fused_layer.h5` prints the
# seed-format tables.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
: "${OUT:?set OUT to the folder whose files come back}"
budget=${FUSED_BUDGET_S:-210}
routings=${FUSED_ROUTINGS:-10000}
rounds=${FUSED_ROUNDS:-15}
layers=${FUSED_LAYERS:-16}
shapes=top-8,top-22,top-16
chain=(--flavour moefin --weights-format bf16-tiled)
mkdir -p "$OUT"
log=$OUT/fused_log.txt
work=$(mktemp -d)
SECONDS=0
tag=fused
budget_hint="raise FUSED_BUDGET_S"
# shellcheck source=scripts/gpu/budget.sh
source scripts/gpu/budget.sh
# The prebuilt set (scripts/gpu_tests.sh --list names test_fused_gpu) serves these; a cold build
# builds only them.
export MOEFIN_BUILD_TARGETS=${MOEFIN_BUILD_TARGETS:-moefin test_fused_gpu}
build_device
status=0

# 1. The gpu test, into its own file and the log.
if fits 45 "the gpu test"; then
  say "\$ $build/tests/test_fused_gpu --log_level=test_suite"
  timeout --signal=INT 45 "$build/tests/test_fused_gpu" --log_level=test_suite \
    >"$OUT/fused_gpu_test.txt" 2>&1
  rc=$?
  cat "$OUT/fused_gpu_test.txt" >>"$log"
  case $rc in
  0) say "gpu test passed" ;;
  77) say "gpu test SKIPPED (no usable GPU: $(tail -1 "$OUT/fused_gpu_test.txt"))"; status=1 ;;
  *) say "gpu test FAILED (exit $rc$( ((rc == 124)) && echo ', timed out'))"; status=1 ;;
  esac
fi

# 2. Equivalence: a pilot measures routings per second, which sizes the full run.
eq=$OUT/fused_equivalence.h5
# shellcheck disable=SC2054 # commas inside the flag values
eq_args=(--shapes "$shapes" --tokens 1,16 --presets seed-after,all-early
  --set finalize.variant=fused --batch 250 "${chain[@]}")
if fits 30 equivalence; then
  logged 15 "$bin" equivalence --shapes top-22 --tokens 16 --presets seed-after \
    --set finalize.variant=fused --routings 500 --batch 250 --ref-checks 0 "${chain[@]}" \
    --out "$work/pilot_eq.h5"
  rate=$(python3 -c "
import h5py, sys
t = h5py.File(sys.argv[1], 'r')['equivalence/table'][()]
print(int(min(t['routings_per_s'])))" "$work/pilot_eq.h5" 2>/dev/null || echo 0)
  # The pilot is a slow unit (T = 16); the six T = 16 units take the time (T = 1 runs ~5x
  # faster): about 7 such units, at 70% of the time for running routings. What is left after
  # the race cells, the layer pilot, the timeline and the sweep (115 s) is the run's, 10..50 s.
  avail=$(($(left) - 115))
  ((avail > 50)) && avail=50
  ((avail < 10)) && avail=10
  per_unit=$((routings / 4))
  fit=$((rate * avail / 10))
  ((fit < per_unit)) && per_unit=$fit
  ((per_unit < 250)) && per_unit=250
  say "pilot: $rate routings/s (top-22, T=16, both PDL modes, every buffer hashed); $per_unit" \
    "routings per (shape, T, preset), $((per_unit * 4)) per shape (asked: $routings)"
  logged $((avail + 15)) "$bin" equivalence "${eq_args[@]}" --routings "$per_unit" \
    --out "$eq" || status=1
fi

# 3. Race cells: the separate finalize may race in the all-early benchmark cells (the verifier
# says which); fused reads its metadata after GEMM2's wait, so none of its cells may.
# shellcheck disable=SC2054 # commas inside the flag values
race_args=(--shapes top-8 --tokens 16 --presets seed-after,all-early --meta before
  --delay-ns 25000 --iterations 100 "${chain[@]}")
race=$OUT/fused_race.h5
race_separate=$OUT/fused_race_separate.h5
if fits 15 "race cells"; then
  logged 30 "$bin" race "${race_args[@]}" --finalize fused --out "$race" || status=1
fi
if fits 15 "race cells of the separate finalize"; then
  # exit 1 is the verifier's race in the benchmark cells: the summary judges these cells.
  logged 30 "$bin" race "${race_args[@]}" --finalize new --out "$race_separate"
fi

# 4. Layer time: fused vs GEMM2 + the dispatcher's finalize. A one-unit pilot measures how far
# sweep layer's cost model is from this GPU (it assumes every expert's weights are read); the
# token list is the first whose scaled estimate fits what is left.
layer=$OUT/fused_layer.h5
timeline=$OUT/fused_timeline.h5
# shellcheck disable=SC2054 # commas inside the flag values
sweep=(--finalize new,fused --rounds "$rounds" --layers "$layers" "${chain[@]}")
estimate() { # shapes tokens: sweep layer's estimated seconds
  "$bin" sweep layer --list --shapes "$1" --tokens "$2" "${sweep[@]}" | awk '/estimated/ {
    for (i = 1; i <= NF; ++i) if ($i ~ /^~/) { sub("~", "", $i); print int($i + 0.5); exit } }'
}
tokens=${FUSED_TOKENS:-}
scale=100 # measured / estimated, in percent
if fits 20 "the layer pilot"; then
  t0=$SECONDS
  if logged 20 "$bin" sweep layer --shapes top-22 --tokens 16 "${sweep[@]}" \
    --out "$work/pilot_layer.h5"; then
    took=$((SECONDS - t0 + 1))
    est=$(estimate top-22 16)
    ((est > 0)) && scale=$((took * 100 / est))
    ((scale > 100)) && scale=100
    ((scale < 10)) && scale=10
    say "layer pilot: ${took} s for ~${est} s estimated: the sweep is sized at ${scale}% of its estimate"
  fi
fi
need_of() { echo $(($(estimate "$shapes" "$1") * scale / 100 + 5)); }
if [[ -z $tokens ]]; then
  for t in 1,2,4,8,16 1,4,16 1,16; do
    tokens=$t
    (($(need_of "$t") + 20 <= $(left))) && break
  done
fi
need=$(need_of "$tokens")
say "sweep layer at T = $tokens: ~${need} s (scaled estimate)"
if fits "$need" "sweep layer"; then
  # Its limit leaves the timeline its 15 s, but never under the scaled estimate + 10 s (a sweep
  # stopped by the limit leaves no file).
  limit=$(($(left) - 15))
  ((limit < need + 10)) && limit=$((need + 10))
  logged "$limit" "$bin" sweep layer --shapes "$shapes" --tokens "$tokens" "${sweep[@]}" \
    --out "$layer" || status=1
fi

# 5. One stamped T = 1 layer of each finalize (fused launches no finalize: its timeline has
# GEMM2 end the layer).
if fits 15 "the timeline"; then
  logged 20 "$bin" sweep layer --shapes top-8 --tokens 1 --finalize new,fused --rounds 3 \
    --layers 8 --stamps "${chain[@]}" --out "$timeline" || status=1
fi

say "summary"
args=()
[[ -f $eq ]] && args+=(--equivalence "$eq")
[[ -f $race ]] && args+=(--race "$race")
[[ -f $layer ]] && args+=(--layer "$layer")
[[ -f $timeline ]] && args+=(--timeline "$timeline")
if ((${#args[@]})); then
  python3 scripts/gpu/fused_summary.py "${args[@]}" 2>&1 | tee -a "$log" || status=1
  if [[ -f $race_separate ]]; then
    python3 scripts/gpu/fused_summary.py --race "$race_separate" 2>&1 | tee -a "$log" || status=1
  fi
else
  say "no result files"
  status=1
fi
say "done in ${SECONDS}s, status $status"
exit $status
