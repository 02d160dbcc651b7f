#!/usr/bin/env bash
# The released chain flavour on the GPU machine (issue 13), from the repository root with .deps
# carried: the released FlashInfer routing block kernel, permuteKernel and activationKernel around
# moefin's GEMMs, finalize the released finalizeKernelSmallBatch (fi_small_batch). In $OUT:
#   released_chain_log.txt          everything printed; the summary is last
#   released_chain_equivalence.h5   moefin equivalence --flavour released, seed-after and safe,
#                                   top-8 at T = 1, 2, 4: PDL on vs off bitwise in every buffer and
#                                   the output against the Kokkos reference chain; a short
#                                   measuring run first sizes the main run to the budget (the
#                                   log states the measured routings/s and the routings per T)
#   released_chain_race.h5          moefin race --flavour released (top-8, T = 4, 200 routings per
#                                   cell): seed-after, safe and all-early with every GEMM placement,
#                                   metadata before the wait, delay 0 (the released routing has no
#                                   delay knob)
#   released_chain_race_snapshot.h5 the same cells with moefin's small_batch finalize, which
#                                   records its pre-wait reads (stale reads counted)
#   released_chain_layer.h5         moefin sweep layer --flavour released, top-8, T = 1, 4, 16
#   released_chain_layer_moefin.h5  the same sweep of moefin's chain, run right after it
# Variables: RELEASED_CHAIN_BUDGET_S (default 300) bounds the runs after the build; a phase that
# does not fit is skipped with a line in the log, and each run is stopped at its share.
# Time: the build (scripts/device_build.sh; seconds when build-device is current) plus at most
# RELEASED_CHAIN_BUDGET_S: gpu test of the released kernels <= 30 s, measuring run <= 20 s, equivalence <= 85 s, race
# <= 40 s each, layer sweeps <= 40 s each (about 5 minutes in all).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
: "${OUT:?set OUT to the folder whose files come back}"
budget=${RELEASED_CHAIN_BUDGET_S:-300}
mkdir -p "$OUT"
log=$OUT/released_chain_log.txt
SECONDS=0
tag=released_chain
budget_hint="raise RELEASED_CHAIN_BUDGET_S"
# shellcheck source=scripts/gpu/budget.sh
source scripts/gpu/budget.sh
export MOEFIN_BUILD_TARGETS=${MOEFIN_BUILD_TARGETS:-moefin test_flashinfer_gpu}
build_device
if ! "$bin" race --flavour released --delay-ns 0 --list >/dev/null 2>>"$log"; then
  say "this build has no released chain (see the line above); nothing to run"
  exit 1
fi
fin=fi_small_batch
common=(--shapes top-8 --flavour released)
status=()

# 1. The released kernels on their own against moefin's references (layout facts, poisoned
# outputs, PDL on and off).
if fits 30 "gpu tests"; then
  if [[ -x $build/tests/test_flashinfer_gpu ]]; then
    logged 25 "$build/tests/test_flashinfer_gpu"
    rc=$?
    status+=("adapter gpu test: $( ((rc == 0)) && echo ok || { ((rc == 77)) && echo skipped || echo "FAILED ($rc)"; })")
  else
    say "note: $build/tests/test_flashinfer_gpu is not built"
  fi
fi

# 2. Equivalence. A short measuring run sizes the main one: routings per T so that both presets
# and all three T fit in ~55 s of routings, 12,000 per shape and preset when the rate allows it
# (the target is 10,000; the H200 measured ~500 routings/s at T = 4).
eq=$OUT/released_chain_equivalence.h5
probe=$(mktemp -d)/probe.h5
if fits 105 equivalence; then
  t0=$SECONDS
  logged 20 "$bin" equivalence "${common[@]}" --tokens 4 --presets seed-after \
    --set finalize.variant=$fin --routings 500 --batch 250 --out "$probe"
  dt=$((SECONDS - t0))
  ((dt < 1)) && dt=1
  # The rate the run printed (GPU time of both PDL modes, hashing included), else 500 / dt
  # (graph builds included); 2 presets x 3 T in ~40 s of routings plus the graph builds.
  # (the progress line of the measuring run: the table after it has a 'routings/s' header)
  rate=$(grep '^\[equivalence ' "$log" | grep -o '[0-9]* routings/s' | tail -1 | cut -d' ' -f1)
  [[ -z $rate ]] && rate=$((500 / dt))
  per=$((rate * 55 / 6 / 250 * 250))
  ((per > 4000)) && per=4000
  ((per < 250)) && per=250
  say "measuring run: 500 routings (T=4, both PDL modes, every buffer hashed) in ${dt}s with the graph builds, ${rate} routings/s measured; main run: $per routings per (T, preset), $((per * 3)) per shape and preset"
  logged 85 "$bin" equivalence "${common[@]}" --tokens 1,2,4 --presets seed-after,safe \
    --set finalize.variant=$fin --routings "$per" --batch 250 --ref-checks 2 --out "$eq"
  rc=$?
  status+=("equivalence exit $rc ($((per * 3)) routings per shape and preset)")
fi

# 3. Race matrix cells (GEMM placements swept; permute and activation are fixed at entry).
race_cells=(--presets seed-after,safe,all-early --meta before --delay-ns 0 --tokens 4
  --iterations 200)
if fits 45 race; then
  logged 40 "$bin" race "${common[@]}" "${race_cells[@]}" --finalize $fin \
    --out "$OUT/released_chain_race.h5"
  status+=("race exit $?")
fi
if fits 45 "race (snapshot)"; then
  logged 40 "$bin" race "${common[@]}" "${race_cells[@]}" --finalize small_batch \
    --out "$OUT/released_chain_race_snapshot.h5"
  status+=("race with moefin's finalize exit $?")
fi

# 4. Whole layer, released chain then moefin's, same shape and token counts.
layer=(--shapes top-8 --tokens 1,4,16 --rounds 3 --layers 8)
if fits 45 "layer sweep"; then
  logged 40 "$bin" sweep layer "${layer[@]}" --flavour released \
    --out "$OUT/released_chain_layer.h5"
  status+=("sweep layer (released) exit $?")
fi
if fits 45 "layer sweep (moefin)"; then
  logged 40 "$bin" sweep layer "${layer[@]}" --flavour moefin \
    --out "$OUT/released_chain_layer_moefin.h5"
  status+=("sweep layer (moefin) exit $?")
fi

say "summary:"
for s in "${status[@]}"; do say "  $s"; done
for f in "$OUT"/released_chain_race*.h5; do
  [[ -f $f ]] && "$bin" race --print "$f" 2>&1 | tail -8 | tee -a "$log"
done
[[ -f $eq ]] && "$bin" equivalence --print "$eq" 2>&1 | tail -12 | tee -a "$log"
say "done in ${SECONDS}s"
