#!/usr/bin/env bash
# The finalize inside GEMM2 (variant fused, issue 15) on the GPU machine, from the repository
# root with .deps carried: correctness first, then the race cells, then the layer times. In $OUT:
#   fused_log.txt          everything printed: the gpu test, the sizing of the equivalence run,
#                          each command's output, the summary (last)
#   fused_equivalence.h5   moefin equivalence with --set finalize.variant=fused: the three seed
#                          shapes at T = 1 and 16, presets seed-after and all-early, PDL on vs
#                          off bitwise in every buffer, the output against the Kokkos reference
#                          chain; up to FUSED_ROUTINGS routings per shape (default 10000), fewer
#                          when the rate a short probe run measured says they do not fit (the
#                          log and the file say how many ran)
#   fused_race.h5          moefin race --finalize fused: top-8 at T = 16, presets seed-after and
#                          all-early (each kernel's placements one at a time), metadata before
#                          the wait, 25 us delay in routing, the verifier's verdict per cell
#   fused_layer.h5         moefin sweep layer --finalize new,fused: the three seed shapes at
#                          FUSED_TOKENS, fused vs GEMM2 + the dispatcher's separate finalize (new)
#                          and the previous one, seed-after and seed-before, same interleaved
#                          rounds
# Variables: FUSED_BUDGET_S seconds of runs after the build (default 240; a phase that does not
# fit is skipped with a line in the log), FUSED_ROUTINGS (10000), FUSED_TOKENS (the first of
# 1:16, 1,2,3,4,6,8,12,16, 1,2,4,8,16, 1,4,16 and 1,16 whose estimate fits what is left: at the
# default budget 1,2,4,8,16), FUSED_ROUNDS (7), FUSED_LAYERS (8).
# Time: the build (scripts/device_build.sh: seconds when build-device is current, 2-3 minutes
# from scratch) plus at most FUSED_BUDGET_S (4 minutes): gpu test <= 45 s, equivalence <= 70 s
# (probe included), race <= 25 s, sweep layer the rest (~110 s estimated at the default budget;
# the token list shrinks when the phases before it took longer).
# Read: the summary at the end of fused_log.txt (scripts/gpu/fused_summary.py over the three
# files: FAIL / CONTRADICTS lines and exit 1 mark a correctness problem; the layer lines give
# new/fused per (shape, T, placement), > 1 where the fused layer is faster); `moefin sweep layer
# --print fused_layer.h5` prints the seed-format tables.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
: "${OUT:?set OUT to the folder whose files come back}"
budget=${FUSED_BUDGET_S:-240}
routings=${FUSED_ROUTINGS:-10000}
rounds=${FUSED_ROUNDS:-7}
layers=${FUSED_LAYERS:-8}
shapes=top-8,top-22,top-16
mkdir -p "$OUT"
log=$OUT/fused_log.txt
SECONDS=0
say() { echo "[fused ${SECONDS}s] $*" | tee -a "$log"; }
run_start=0
left() { echo $((budget - (SECONDS - run_start))); }
fits() { # seconds what: true when that much is left of the budget
  if (($(left) < $1)); then
    say "skipped: $2 needs ~$1 s, $(left) s left (raise FUSED_BUDGET_S)"
    return 1
  fi
}
logged() { # limit_s command...: the command's output into the log, its status returned
  local limit=$1
  shift
  say "\$ $*"
  timeout --signal=INT "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  say "exit $rc$( ((rc == 124)) && echo ' (timed out)')"
  return $rc
}

say "start: budget ${budget}s after the build"
if ! scripts/device_build.sh >>"$log" 2>&1; then
  tail -60 "$log"
  exit 1
fi
prefix=$PWD/.deps/prefix
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
build=${MOEFIN_BUILD_DIR:-build-device}
bin=$PWD/$build/moefin
run_start=$SECONDS
say "built in ${SECONDS}s"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >>"$log" 2>&1
status=0

# 1. The gpu test: fused vs the separate scalar finalize bitwise and vs the reference chain
# (K = 1, 8, 22, 64; PDL on and off; poisoned counters), and GEMM2 alone with dropped experts.
if fits 45 "the gpu test"; then
  logged 45 "$build/tests/test_fused_gpu" --log_level=test_suite || status=1
fi

# 2. Equivalence: a probe run measures routings per second, which sizes the full run.
eq=$OUT/fused_equivalence.h5
# shellcheck disable=SC2054 # commas inside the flag values
eq_args=(--shapes "$shapes" --tokens 1,16 --presets seed-after,all-early
  --set finalize.variant=fused --batch 250)
if fits 30 equivalence; then
  probe=$(mktemp -d)/probe.h5
  logged 15 "$bin" equivalence --shapes top-22 --tokens 16 --presets seed-after \
    --set finalize.variant=fused --routings 500 --batch 250 --ref-checks 0 --out "$probe"
  rate=$(python3 -c "
import h5py, sys
t = h5py.File(sys.argv[1], 'r')['equivalence/table'][()]
print(int(min(t['routings_per_s'])))" "$probe" 2>/dev/null || echo 0)
  # The probe is the slowest unit (the most weights per layer); the six T = 16 units take the
  # time (T = 1 runs ~5x faster): about 7 such units, at 70% of the time for running routings.
  avail=$(($(left) - 25 - 110))
  ((avail > 40)) && avail=40
  ((avail < 10)) && avail=10
  per_unit=$((routings / 4))
  fit=$((rate * avail / 10))
  ((fit < per_unit)) && per_unit=$fit
  ((per_unit < 250)) && per_unit=250
  say "probe: $rate routings/s (top-22, T=16, both PDL modes); $per_unit routings per unit," \
    "$((per_unit * 4)) per shape (asked: $routings)"
  logged $((avail + 15)) "$bin" equivalence "${eq_args[@]}" --routings "$per_unit" \
    --out "$eq" || status=1
fi

# 3. Race cells: the separate finalize races in the all-early benchmark cells; fused must not.
race=$OUT/fused_race.h5
if fits 25 "race cells"; then
  logged 30 "$bin" race --shapes top-8 --tokens 16 --presets seed-after,all-early \
    --meta before --delay-ns 25000 --finalize fused --iterations 100 --out "$race" || status=1
fi

# 4. Layer time: fused vs GEMM2 + the dispatcher's finalize, the token list sized to the budget.
layer=$OUT/fused_layer.h5
tokens=${FUSED_TOKENS:-}
estimate() { # tokens: the sweep's estimated seconds
  "$bin" sweep layer --list --shapes "$shapes" --tokens "$1" --finalize new,fused \
    --rounds "$rounds" --layers "$layers" | awk '/estimated/ { for (i = 1; i <= NF; ++i)
      if ($i ~ /^~/) { sub("~", "", $i); print int($i + 0.5); exit } }'
}
if [[ -z $tokens ]]; then
  for t in 1:16 1,2,3,4,6,8,12,16 1,2,4,8,16 1,4,16 1,16; do
    tokens=$t
    (($(estimate "$t") + 10 <= $(left))) && break
  done
fi
need=$(estimate "$tokens")
say "sweep layer at T = $tokens: ~${need} s estimated"
if fits "$need" "sweep layer"; then
  logged $(($(left) + 20)) "$bin" sweep layer --shapes "$shapes" --tokens "$tokens" \
    --finalize new,fused --rounds "$rounds" --layers "$layers" --out "$layer" || status=1
fi

say "summary"
args=()
[[ -f $eq ]] && args+=(--equivalence "$eq")
[[ -f $race ]] && args+=(--race "$race")
[[ -f $layer ]] && args+=(--layer "$layer")
if ((${#args[@]})); then
  python3 scripts/gpu/fused_summary.py "${args[@]}" 2>&1 | tee -a "$log" || status=1
else
  say "no result files"
  status=1
fi
say "done in ${SECONDS}s, status $status"
exit $status
