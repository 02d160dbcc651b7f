#!/usr/bin/env bash
# The GPU side of the hostile-input work (docs/design/robustness.md), on
# the GPU machine from the repository root (carry: .deps). Takes about 8 minutes: the build
# (scripts/device_build.sh, ~3 min; HARDEN_SKIP_BUILD=1 reuses build-device), at most
# HARDEN_BUDGET_S (default 150) seconds of checks 1-3 and at most HARDEN_SANITIZE_S (default 180)
# seconds of compute-sanitizer (4). Checks, in this order:
#   1. a bad value gives exit 2 before any device work, also with a GPU (race --ctas-per-sm 0,
#      equivalence --replay x, check finalize --tolerance 0, ...);
#   2. every GPU experiment's file is complete when the run ends (moefin show: exit 0, state
#      `complete`), including reading its own file back at the end (race, equivalence, sweep
#      layer, sweep finalize);
#   3. a race run killed (SIGKILL) after its first rows leaves a file that moefin show refuses as
#      incomplete, and --resume completes it with exactly the rows of an uninterrupted run;
#   4. compute-sanitizer memcheck over small runs of the experiments whose writers changed
#      (check finalize, race, sweep layer, pdl-probe), and initcheck over check finalize: each
#      must exit 0 and report "0 errors"; a run that does not fit the budget is reported SKIP.
# Outputs: $OUT/harden_log.txt (everything; the last lines are the summary "harden: N checks, M
# failed") and $OUT/harden_sanitizer.txt (each sanitizer command, its exit status and summary).
# HARDEN_BIN=path and HARDEN_SKIP_BUILD=1 run it against another build (e.g. to try the script
# on a machine without a GPU, where steps 2-4 then fail).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
: "${OUT:?set OUT to the folder whose files come back}"
log=$OUT/harden_log.txt
res=$(mktemp -d)
budget=${HARDEN_BUDGET_S:-150}
san_budget=${HARDEN_SANITIZE_S:-180}
checks=0
failed=0
say() { echo "[harden ${SECONDS}s] $*" | tee -a "$log"; }
verdict() { # ok(0/1) what
  checks=$((checks + 1))
  if [[ $1 == 0 ]]; then
    say "PASS $2"
  else
    failed=$((failed + 1))
    say "FAIL $2"
  fi
}
fits() { # seconds: whether that much is left of the budget after the build
  (($(date +%s) + $1 <= deadline))
}

if [[ ${HARDEN_SKIP_BUILD:-0} != 1 ]]; then
  scripts/device_build.sh >>"$log" 2>&1 || {
    say "build failed"
    tail -40 "$log"
    exit 1
  }
fi
export LD_LIBRARY_PATH=$PWD/.deps/prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=${HARDEN_BIN:-$PWD/build-device/moefin}
deadline=$(($(date +%s) + budget))
say "built; budget ${budget}s for the runs; files in $res"

# 1. Bad values: exit 2 at once, whatever the device.
for args in "race --ctas-per-sm 0" "equivalence --replay x" "check finalize --tolerance 0" \
  "sweep layer --carveout none" "pdl-probe --seed -1"; do
  # shellcheck disable=SC2086
  timeout 30 "$bin" $args >>"$log" 2>&1
  rc=$?
  verdict $((rc == 2 ? 0 : 1)) "moefin $args: exit $rc (want 2)"
done

# 2. Each GPU experiment, small: its file must be complete at the end.
complete() { # file
  local shown
  shown=$("$bin" show "$1" 2>&1)
  [[ $? == 0 && $shown == *"moefin_state"*"complete"* ]]
}
run_small() { # seconds name file args...
  local limit=$1 name=$2 file=$3
  shift 3
  if ! fits "$limit"; then
    say "SKIP $name (budget)"
    return
  fi
  say "$name: moefin $* --out $file"
  timeout --signal=KILL "$limit" "$bin" "$@" --out "$file" >>"$log" 2>&1
  local rc=$?
  complete "$file"
  verdict $? "$name: exit $rc; $(basename "$file") is complete"
}
run_small 90 pdl-probe "$res/probe.h5" pdl-probe --iterations 20
run_small 90 check "$res/check.h5" check finalize --hidden 1024 --tokens 1,8 --top-k 8,22 \
  --weights bf16 --routings uniform
run_small 90 sweep "$res/sweep.h5" sweep finalize --hidden 4096 --tokens 1 --top-k 8 \
  --weights bf16 --rounds 3 --launches 20 --repeat-shapes 0
run_small 90 equivalence "$res/equivalence.h5" equivalence --shapes top-8 --tokens 1 \
  --presets seed-after --routings 250
run_small 90 layer "$res/layer.h5" sweep layer --shapes top-8 --tokens 1 --rounds 3 --layers 4
# shellcheck disable=SC2054 # "0,25000" is one value
race_args=(race --tokens 4 --presets all-early --meta before --delay-ns 0,25000 --iterations 20)
run_small 120 race "$res/race.h5" "${race_args[@]}"

# 3. A race run killed after its first rows, then resumed.
rows() { # file: the row count moefin show gives for /race_matrix
  "$bin" show "$1" 2>/dev/null | sed -n 's|^/race_matrix (table): \([0-9]*\) rows.*|\1|p'
}
if fits 240 && [[ -f $res/race.h5 ]]; then
  want=$(rows "$res/race.h5")
  killed=$res/race_killed.h5
  "$bin" "${race_args[@]}" --out "$killed" >"$res/killed.out" 2>"$res/killed.err" &
  pid=$!
  for _ in $(seq 600); do # the first two rows (progress lines), or 60 s
    (($(grep -c '^\[race ' "$res/killed.err" 2>/dev/null) >= 2)) && break
    kill -0 "$pid" 2>/dev/null || break # it ended (or failed) first
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  cat "$res/killed.err" >>"$log"
  shown=$("$bin" show "$killed" 2>&1)
  rc=$?
  echo "$shown" >>"$log"
  verdict $((rc == 1 && $(grep -c incomplete <<<"$shown") > 0 ? 0 : 1)) \
    "killed race: show exits $rc and says incomplete"
  timeout 150 "$bin" "${race_args[@]}" --resume "$killed" >>"$log" 2>&1
  rc=$?
  got=$(rows "$killed")
  complete "$killed"
  verdict $((rc <= 1 && $? == 0 && ${got:-0} == ${want:--1} ? 0 : 1)) \
    "resumed race: exit $rc, complete, ${got:-?} rows (uninterrupted run: ${want:-?})"
else
  say "SKIP kill and resume (budget, or the race run failed)"
fi

# 4. compute-sanitizer, on its own budget.
san=$OUT/harden_sanitizer.txt
: >"$san"
san_deadline=$(($(date +%s) + san_budget))
sanitize() { # tool seconds name args...
  local tool=$1 limit=$2 name=$3
  shift 3
  if (($(date +%s) + limit > san_deadline)); then
    say "SKIP sanitizer $tool $name (budget)"
    return
  fi
  local file=$res/san_${tool}_$name.h5 slog=$res/san_${tool}_$name.log
  local cmd=("$san_bin" --tool "$tool" --error-exitcode 9 "$bin" "$@" --seed 1 --out "$file")
  echo "\$ ${cmd[*]}" >>"$san"
  timeout --signal=KILL "$limit" "${cmd[@]}" >"$slog" 2>&1
  local rc=$?
  echo "exit $rc" >>"$san"
  grep -E "ERROR SUMMARY|Error|error" "$slog" | tail -6 >>"$san"
  verdict $((rc == 0 && $(grep -c "ERROR SUMMARY: 0 errors" "$slog") > 0 ? 0 : 1)) \
    "sanitizer $tool $name: exit $rc, $(grep -o "ERROR SUMMARY: [0-9]* error[s]*" "$slog" | tail -1)"
}
# shellcheck disable=SC2012 # one path, no odd characters
san_bin=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
if [[ -n $san_bin ]]; then
  sanitize memcheck 60 check check finalize --hidden 1024 --tokens 1,8 --top-k 8 --weights bf16 \
    --routings uniform --variants scalar,small_batch,vecload
  sanitize initcheck 45 check check finalize --hidden 1024 --tokens 8 --top-k 8 --weights bf16 \
    --routings uniform --variants small_batch
  sanitize memcheck 45 probe pdl-probe --iterations 4
  sanitize memcheck 60 race race --tokens 4 --presets all-early --meta before --delay-ns 0 \
    --iterations 4
  sanitize memcheck 60 layer sweep layer --shapes top-8 --tokens 1 --rounds 3 --layers 2
  cat "$san" >>"$log"
else
  verdict 1 "compute-sanitizer not on PATH"
fi

say "harden: $checks checks, $failed failed"
grep -E "PASS|FAIL|SKIP" "$log" | tail -20
