#!/usr/bin/env bash
# A quick pass over every GPU part on the GPU machine (repository root, .deps carried): build,
# the gpu-labelled tests, and a small run of each GPU command, each under a time limit, so that
# a broken part shows up in minutes rather than inside a long run. $OUT/quick_log.txt gets
# everything printed; the small runs' result files go to $QUICK_OUT (default: a temporary folder,
# since $OUT brings back at most 8 files and a long run may follow in the same call).
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to the folder whose files come back}"
log=$OUT/quick_log.txt
res=${QUICK_OUT:-$(mktemp -d)}
SECONDS=0
say() { echo "[quick ${SECONDS}s] $*" | tee -a "$log"; }
step() { # seconds name command...
  local limit=$1 name=$2
  shift 2
  say "$name: $*"
  timeout --signal=INT "$limit" "$@" >>"$log" 2>&1
  say "$name: exit $?"
}
scripts/device_build.sh >>"$log" 2>&1 || { say "build failed"; tail -60 "$log"; exit 1; }
export LD_LIBRARY_PATH=$PWD/.deps/prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=$PWD/build-device/moefin
say "built"
scripts/gpu_tests.sh --timeout 150 >>"$log" 2>&1
say "gpu tests: exit $?"
step 60 check "$bin" check finalize --hidden 1024,7168 --tokens 1,8 --top-k 1,8,22,64 \
  --weights bf16,fp32,none --routings uniform,uniform/ep2,hot --out "$res/quick_check.h5"
step 60 sweep "$bin" sweep finalize --hidden 4096 --tokens 1,16 --top-k 8,32 --weights bf16 \
  --rounds 3 --launches 50 --repeat-shapes 0 --out "$res/quick_sweep.h5"
step 60 equivalence "$bin" equivalence --shapes top-8 --tokens 1,16 --presets seed-after,all-early \
  --routings 500 --out "$res/quick_equivalence.h5"
step 60 race "$bin" race --tokens 4 --presets all-early,seed-after --delay-ns 0,25000 \
  --iterations 100 --out "$res/quick_race.h5"
step 60 layer "$bin" sweep layer --shapes top-8 --tokens 1,64 --rounds 3 --out "$res/quick_layer.h5"
say "done"
grep -E "exit|FAIL|fail|error|Error|mismatch" "$log" | tail -60
