#!/usr/bin/env bash
# The layer-chain runs on the GPU machine, from the repository root (carry: .deps; on a second
# call also the first call's files, see CHAIN_RESUME_DIR). Everything lands in $OUT:
#   chain_log.txt        everything printed (tables included), and a line "done: PHASE" for each
#                        phase finished (a second call skips them)
#   ctest_gpu.txt        the gpu-labelled chain tests
#   equivalence.h5       moefin equivalence, defaults
#   equivalence_bench.h5 seed-after and safe, 2,000 routings x T {1,2,4,8,16} per shape, with and
#                        without 25 us of delay in routing (10,000 routings per shape and setting)
#   race.h5              moefin race, defaults, with timelines (--stamps)
#   layer_sweep.h5       moefin sweep layer --stamps=1,8,32 (defaults, and the per-CTA timelines of
#                        each configuration's last layer at T = 1, 8 and 32)
#   sanitizer.txt        compute-sanitizer memcheck/racecheck/synccheck/initcheck summaries
# Budget: CHAIN_BUDGET_S seconds (default 540) for the whole call; a phase that does not fit is
# left for the next call, and an interrupted moefin run is resumed (rows are flushed one by one).
# CHAIN_PHASES selects phases (default: build test equiv bench race sweep sanitize).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out/chain}
prev=${CHAIN_RESUME_DIR:-out/chain-prev}
budget=${CHAIN_BUDGET_S:-540}
phases=${CHAIN_PHASES:-build test equiv bench race sweep sanitize}
mkdir -p "$out"
log=$out/chain_log.txt
if [[ -d $prev ]]; then
  for f in "$prev"/*; do
    [[ -f $f && ! -e $out/$(basename "$f") ]] && cp "$f" "$out/"
  done
fi
touch "$log"
say() { echo "[chain $(date -u +%H:%M:%S) +${SECONDS}s] $*" | tee -a "$log"; }
left() { echo $((budget - SECONDS)); }
is_done() { grep -qx "done: $1" "$log"; }
mark_done() { echo "done: $1" >> "$log"; }
done_list() { sed -n 's/^done: //p' "$log" | tr '\n' ' '; }
# Runs moefin with a time limit; the result file is created or, when it exists, resumed.
moefin_run() { # phase need_seconds file args...
  local phase=$1 need=$2 file=$3
  shift 3
  if (($(left) < need)); then
    say "$phase: $(left)s left, needs ~${need}s: left for the next call"
    return 2
  fi
  local io=(--out "$file")
  [[ -f $file ]] && io=(--resume "$file")
  say "$phase: moefin $* ${io[*]}"
  timeout --signal=INT $(($(left) - 10)) "$bin" "$@" "${io[@]}" >> "$log" 2>&1
  local rc=$?
  say "$phase: exit $rc"
  return $rc
}

prefix=$PWD/.deps/prefix
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=build-device/moefin
say "phases: $phases; budget ${budget}s; done before: $(done_list)"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >> "$log" 2>&1

for phase in $phases; do
  if is_done "$phase"; then
    say "$phase: done in an earlier call"
    continue
  fi
  case $phase in
  build)
    say "build: scripts/device_build.sh"
    if scripts/device_build.sh >> "$log" 2>&1; then mark_done build; else
      say "build FAILED (log above)"; exit 1; fi
    ;;
  test)
    (($(left) < 120)) && { say "test: left for the next call"; continue; }
    say "test: scripts/gpu_tests.sh 'test_chain|test_gpu_smoke'"
    scripts/gpu_tests.sh --timeout $(($(left) - 10)) 'test_chain|test_gpu_smoke' \
      > "$out/ctest_gpu.txt" 2>&1
    rc=$?
    tail -5 "$out/ctest_gpu.txt" | tee -a "$log"
    ((rc == 0)) && mark_done test
    ;;
  equiv)
    moefin_run equiv 150 "$out/equivalence.h5" equivalence
    rc=$?; ((rc == 0 || rc == 1)) && mark_done equiv
    ;;
  bench)
    ok=1
    for delay in 0 25000; do
      moefin_run "bench delay=$delay" 60 "$out/equivalence_bench.h5" equivalence \
        --presets seed-after,safe --routings 2000 --batch 500 --ref-checks 0 --delay-ns "$delay"
      rc=$?; ((rc == 0 || rc == 1)) || ok=0
    done
    ((ok)) && mark_done bench
    ;;
  race)
    moefin_run race 60 "$out/race.h5" race --stamps
    rc=$?; ((rc == 0)) && mark_done race
    ;;
  sweep)
    moefin_run sweep 90 "$out/layer_sweep.h5" sweep layer --stamps=1,8,32
    rc=$?; ((rc == 0)) && mark_done sweep
    ;;
  sanitize)
    (($(left) < 150)) && { say "sanitize: left for the next call"; continue; }
    san=$out/sanitizer.txt
    : > "$san"
    small=(--shapes H512/I256/E32/top-6 --tokens 4,20 --presets seed-after --routings 4 --batch 4)
    for tool in memcheck racecheck synccheck initcheck; do
      cmd=(compute-sanitizer --tool "$tool" "$bin" equivalence "${small[@]}" --seed 1
           --out "/tmp/sanitize_$tool.h5")
      rm -f "/tmp/sanitize_$tool.h5"
      echo "\$ ${cmd[*]}" >> "$san"
      timeout 120 "${cmd[@]}" > "/tmp/sanitize_$tool.log" 2>&1
      echo "exit $?" >> "$san"
      grep -E "SUMMARY|Error|error|Hazard|hazard|mismatch" "/tmp/sanitize_$tool.log" | tail -8 >> "$san"
    done
    # The race's benchmark cell under racecheck: serialized, so no mismatch and no hazard.
    cmd=(compute-sanitizer --tool racecheck "$bin" race --shapes H512/I256/E32/top-6 --tokens 4
         --presets all-early --triggers sweep --meta before --delay-ns 25000 --iterations 8
         --seed 1 --out /tmp/sanitize_race.h5)
    rm -f /tmp/sanitize_race.h5
    echo "\$ ${cmd[*]}" >> "$san"
    timeout 150 "${cmd[@]}" > /tmp/sanitize_race.log 2>&1
    echo "exit $?" >> "$san"
    grep -E "SUMMARY|benchmark cells|all-early:" /tmp/sanitize_race.log | tail -6 >> "$san"
    cat "$san" >> "$log"
    mark_done sanitize
    ;;
  *)
    say "unknown phase '$phase'"
    ;;
  esac
done
say "finished; done: $(done_list)"
