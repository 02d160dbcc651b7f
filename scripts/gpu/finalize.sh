#!/usr/bin/env bash
# The finalize part on the GPU machine, from the repository root with .deps carried; every result
# goes to $OUT (at most 8 files). Steps already done in a previous call's copy (--resume-from
# DIR, e.g. data/h200) are skipped or continued, so 2-3 calls of < 9 minutes cover everything:
#   1 build (scripts/device_build.sh)       h200_finalize_build.txt: resource usage, ctest -L gpu
#   2 moefin check finalize (full grid)     h200_finalize_check.h5
#   3 compute-sanitizer x 4 on a subset     h200_finalize_sanitizers.txt
#   4 PyTorch peers                         h200_finalize_peers.h5
#   5 moefin sweep finalize (a, b, c; hot)  h200_finalize_sweep.h5, h200_finalize_table.txt
#   all output                              h200_finalize_log.txt
# usage: scripts/gpu/finalize.sh [--resume-from DIR] [--budget-s SECONDS]
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to the folder whose files come back}"
resume_from=""
budget=${MOEFIN_BUDGET_S:-530}
while (($#)); do
  case $1 in
    --resume-from) resume_from=$2; shift 2 ;;
    --budget-s) budget=$2; shift 2 ;;
    *) echo "finalize.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
if [[ -n $resume_from ]]; then
  for f in "$resume_from"/h200_finalize_*; do
    [[ -f $f ]] && cp "$f" "$OUT/"
  done
fi
log=$OUT/h200_finalize_log.txt
info=$OUT/h200_finalize_build.txt
check=$OUT/h200_finalize_check.h5
sanit=$OUT/h200_finalize_sanitizers.txt
peers=$OUT/h200_finalize_peers.h5
sweep=$OUT/h200_finalize_sweep.h5
table=$OUT/h200_finalize_table.txt
SECONDS=0
say() { echo "[finalize.sh ${SECONDS}s] $*" | tee -a "$log"; }
left() { echo $((budget - SECONDS)); }
minutes_left() { # minutes for a step, keeping $1 seconds for what follows
  awk -v s="$(( $(left) - $1 ))" 'BEGIN { printf "%.2f", s / 60 }'
}
# True when at least half a minute is left for a step (--max-minutes 0 would mean no limit).
enough() { awk -v m="$1" 'BEGIN { exit !(m >= 0.5) }'; }
# Runs a command with its output appended to the log; the command's status is returned.
run_logged() {
  say "\$ $*"
  "$@" >>"$log" 2>&1
  local rc=$?
  say "exit $rc"
  return $rc
}

say "start (budget ${budget}s, resume from '${resume_from:-nothing}')"
if ! run_logged scripts/device_build.sh; then
  tail -80 "$log"
  exit 1
fi
prefix=$PWD/.deps/prefix
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=$PWD/build-device/moefin

# 1. Build facts and the gpu tests, once.
if ! grep -q '^ctest:' "$info" 2>/dev/null; then
  {
    echo "== moefin info"; "$bin" info --check
    echo "== registers and spills of the finalize kernels (sm_90, ptxas -v)"
    nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
    "$nvcc" -std=c++17 -arch=sm_90 -O3 --expt-relaxed-constexpr -I. -Xptxas -v -c \
      kernels/finalize/finalize_dispatch.cu -o /tmp/finalize_dispatch.o 2>&1 |
      grep -E "Compiling entry|registers|spill" | sed -E 's/_ZN6moefin8finalize7kernels[0-9]+//'
    echo "== gpu tests"
    scripts/gpu_tests.sh 2>&1 | tail -40
    echo "ctest: done at ${SECONDS}s"
  } >"$info" 2>&1
  say "build facts and gpu tests: $(grep -E 'tests passed|tests failed' "$info" | tail -1)"
fi

# 2. The full check (resumable; quick when complete).
m=$(minutes_left 200)
if enough "$m"; then
  args=(--max-minutes "$m")
  [[ -f $check ]] && args+=(--resume "$check") || args+=(--out "$check")
  run_logged "$bin" check finalize "${args[@]}"
  say "check: $(grep -h -E '^(check finalize:|incomplete)' "$log" | tail -1)"
fi

# 3. Sanitizers on a representative subset, once (H aligned and not, top-K 1..64, all weights).
if ! grep -q '^sanitizers: done' "$sanit" 2>/dev/null && ((SECONDS < budget - 150)); then
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  {
    echo "# compute-sanitizer over moefin check finalize on a subset ($(date -u +%FT%TZ))"
    for tool in memcheck racecheck synccheck initcheck; do
      f=/tmp/finalize_sanitizer_$tool.h5
      rm -f "$f"
      cmd=("$cs" --tool "$tool" --error-exitcode 9 "$bin" check finalize --hidden 2880,1002
           --tokens 1,5 --top-k 1,6,64 --weights fp32,none --routings uniform/ep2 --out "$f")
      echo "\$ ${cmd[*]}"
      timeout 100 "${cmd[@]}" >/tmp/finalize_sanitizer_$tool.log 2>&1
      rc=$?
      echo "exit $rc$( ((rc == 124)) && echo ' (timed out after 100 s)')"
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY|check finalize:|Error|Hazard" \
        /tmp/finalize_sanitizer_$tool.log | head -20
    done
    echo "sanitizers: done at ${SECONDS}s"
  } >"$sanit" 2>&1
  say "sanitizers: $(grep -cE 'ERROR SUMMARY: 0 errors' "$sanit") of 4 tools report 0 errors"
fi

# 4. PyTorch peers (resumable).
m=$(minutes_left 45)
if enough "$m"; then
  args=(--max-minutes "$m")
  [[ -f $peers ]] && args+=(--resume "$peers") || args+=(--out "$peers")
  run_logged python3 experiments/finalize/peers_torch.py "${args[@]}"
  say "peers: $(grep -h -E '^(wrote|incomplete)' "$log" | tail -1)"
fi

# 5. The sweep (resumable): what is left of the budget.
m=$(minutes_left 15)
if enough "$m"; then
  args=(--modes a,b,c --l2 hot --max-minutes "$m")
  [[ -f $sweep ]] && args+=(--resume "$sweep") || args+=(--out "$sweep")
  run_logged "$bin" sweep finalize "${args[@]}"
  say "sweep: $(grep -h -E '^(wrote|incomplete)' "$log" | tail -1)"
fi
if [[ -f $sweep ]]; then
  files=("$sweep")
  [[ -f $peers ]] && files+=("$peers")
  "$bin" sweep finalize --print "${files[@]}" >"$table" 2>&1
fi
say "done (lines starting 'incomplete' above: continue with --resume-from a copy of \$OUT)"
ls -la "$OUT" | tee -a "$log"
