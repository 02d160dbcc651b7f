#!/usr/bin/env bash
# On the GPU machine (repository root, .deps carried): what `moefin compare`, the `--estimate`
# cost model and `info --check` do on a real GPU. Takes about 2 minutes after the build (the
# build itself: a few minutes on a fresh machine), within ANALYSIS_BUDGET_S (default 420 s):
#   1 build (scripts/device_build.sh)
#   2 correctness first: moefin info --check (must exit 0 on a usable GPU), moefin check finalize
#     on the subset timed below
#   3 sweep finalize --estimate of the subset (H = 2048, 5120: 288 shapes, 5184 rows), then the
#     same sweep twice, A and B, each timed: the estimate against the real time
#   4 moefin compare A B: an A/A comparison of two runs of one build, i.e. how many
#     configurations the verdicts call slower or faster when nothing changed; and the committed
#     data/h200/h200_finalize_sweep.h5 against A (same configurations, another day)
# Files in $OUT (7): analysis_log.txt, analysis_sweep_a.h5, analysis_sweep_b.h5,
# analysis_compare_aa.csv, analysis_compare_aa.md, analysis_compare_committed.csv,
# analysis_summary.txt (printed last).
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to the folder whose files come back}"
budget=${ANALYSIS_BUDGET_S:-420}
mkdir -p "$OUT"
log=$OUT/analysis_log.txt
summary=$OUT/analysis_summary.txt
a=$OUT/analysis_sweep_a.h5
b=$OUT/analysis_sweep_b.h5
work=$(mktemp -d)
SECONDS=0
say() { echo "[analysis.sh ${SECONDS}s] $*" | tee -a "$log"; }
left() { echo $((budget - SECONDS)); }
note() { echo "$*" | tee -a "$summary" >>"$log"; }
# Runs a command with its output appended to the log (and kept in $work/last); returns its status.
run_logged() {
  say "\$ $*"
  "$@" >"$work/last" 2>&1
  local rc=$?
  cat "$work/last" >>"$log"
  say "exit $rc"
  return $rc
}

say "start (budget ${budget}s)"
if ! run_logged scripts/device_build.sh; then
  tail -80 "$log"
  exit 1
fi
export LD_LIBRARY_PATH=$PWD/.deps/prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=$PWD/build-device/moefin
subset=(--hidden 2048,5120 --modes a,b,c --l2 hot)
: >"$summary"

# 2. Correctness first.
run_logged "$bin" info --check
note "info --check: exit $? ($(grep -m1 'device check' "$work/last"))"
run_logged timeout 120 "$bin" check finalize --hidden 2048,5120 --tokens 1,8,64 \
  --out "$work/check.h5"
check_rc=$?
note "check finalize (subset): exit $check_rc"
if ((check_rc != 0)); then
  say "the kernels of the subset are not correct: no timing"
  cat "$summary"
  exit 1
fi

# 3. The estimate, then the same sweep twice.
run_logged "$bin" sweep finalize "${subset[@]}" --estimate
estimate=$(grep -oE 'expected ~[0-9.]+ min on an H200-class GPU \([0-9]+ s' "$work/last" |
  grep -oE '\([0-9]+ s' | tr -dc '0-9')
note "estimate of the subset: ${estimate:-?} s (grid, fixed phases and the repeated shapes)"
for run in a b; do
  file=$a
  [[ $run == b ]] && file=$b
  if (($(left) < 90)); then
    say "budget: ${run} not run"
    continue
  fi
  start=$SECONDS
  run_logged "$bin" sweep finalize "${subset[@]}" --max-minutes "$(awk -v s="$(left)" \
    'BEGIN { printf "%.2f", (s - 60) / 60 }')" --out "$file"
  took=$((SECONDS - start))
  grid=$(grep -oE '\[sweep finalize\] [0-9]+ configurations in [0-9.]+s' "$work/last")
  note "sweep ${run}: ${took} s in all (${grid:-no grid line}); estimate ${estimate:-?} s"
done

# 4. Comparisons.
if [[ -f $a && -f $b ]]; then
  "$bin" compare "$a" "$b" --format csv --out "$OUT/analysis_compare_aa.csv" >"$work/aa" 2>&1
  aa_rc=$?
  cat "$work/aa" >>"$log"
  "$bin" compare "$a" "$b" --rows changed --out "$OUT/analysis_compare_aa.md" >>"$log" 2>&1
  note "A/A (two runs, nothing changed; exit $aa_rc):"
  grep -E '^/|compare:' "$work/aa" | tee -a "$summary" >>"$log"
  for t in 3 10; do
    "$bin" compare "$a" "$b" --threshold "$t" --table finalize_sweep --format json \
      --out "$work/aa_$t.json" >>"$log" 2>&1
    note "A/A at --threshold $t: $(grep -oE '"verdicts":\{[^}]*\}' "$work/aa_$t.json")"
  done
fi
if [[ -f $a ]]; then
  "$bin" compare data/h200/h200_finalize_sweep.h5 "$a" --format csv \
    --out "$OUT/analysis_compare_committed.csv" >"$work/committed" 2>&1
  committed_rc=$?
  cat "$work/committed" >>"$log"
  note "committed data/h200/h200_finalize_sweep.h5 vs A (exit $committed_rc):"
  grep -E '^/|compare:|error' "$work/committed" | tee -a "$summary" >>"$log"
fi
say "done"
echo "== summary"
cat "$summary"
