#!/usr/bin/env bash
# The decode routing on the GPU machine, from the repository root (carry: .deps; prebuilt
# binaries: MOEFIN_PREBUILT=1 scripts/device_prepare.sh). Correctness first:
#   1. test_decode_gpu's decode-routing cases (bitwise the block kernel, every PDL knob) under
#      compute-sanitizer memcheck, racecheck, synccheck and initcheck
#   2. moefin equivalence of the decode chain flavours (which route with it up to 32 tokens):
#      the three seed shapes, T = 1, 4, 16, seed-after and safe, bf16 and fp4 weights,
#      ROUTING_ROUTINGS (default 3500) routings per (shape, format, preset, T): 10,500 per shape,
#      format and preset, each PDL on vs off bitwise, outputs vs the Kokkos reference
#   3. moefin sweep routing (block, fast, released), the three seed shapes, T = 1..16
# At most ROUTING_BUDGET_S seconds (default 420) after the build; a phase that does not fit is
# skipped with a line in the log; ROUTING_PHASES picks phases (default: build sanitize
# equivalence sweep). In $OUT:
#   routing_log.txt      everything printed, "done: PHASE" per finished phase
#   sanitizers.txt       each tool's summary line and any error
#   equivalence.h5       moefin equivalence
#   routing_sweep.h5     moefin sweep routing
#   summary.txt          the equivalence and routing tables
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-out/routing}
budget=${ROUTING_BUDGET_S:-420}
phases=${ROUTING_PHASES:-build sanitize equivalence sweep}
routings=${ROUTING_ROUTINGS:-3500}
mkdir -p "$out"
log=$out/routing_log.txt
touch "$log"
tag=routing
# shellcheck source=scripts/gpu/phases.sh
source scripts/gpu/phases.sh
start_log

for phase in $phases; do
  case $phase in
  build)
    build_phase "moefin test_decode_gpu"
    ;;
  sanitize)
    cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    for tool in memcheck racecheck synccheck initcheck; do
      (($(left) < 260)) && { say "sanitize-$tool: skipped (budget)"; continue; }
      say "sanitize-$tool"
      timeout --signal=INT 120 "$cs" --tool "$tool" --error-exitcode 9 \
        build-device/tests/test_decode_gpu --run_test='fast_routing*' > "$out/san_$tool.txt" 2>&1
      rc=$?
      say "sanitize-$tool: exit $rc"
      { echo "== $tool: exit $rc"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Error|errors detected|No errors" \
        "$out/san_$tool.txt" | head -5; } >> "$out/sanitizers.txt"
      rm -f "$out/san_$tool.txt"
    done
    mark_done sanitize
    ;;
  equivalence)
    run equivalence 60 40 "$bin" equivalence --shapes top-8,top-22,top-16 --tokens 1,4,16 \
      --presets seed-after,safe --weights-format bf16,fp4 --routings "$routings" \
      --out "$out/equivalence.h5" && mark_done equivalence
    ;;
  sweep)
    run sweep 15 0 "$bin" sweep routing --out "$out/routing_sweep.h5" && mark_done sweep
    ;;
  *)
    say "unknown phase '$phase'"
    ;;
  esac
done
{
  [[ -f $out/sanitizers.txt ]] && cat "$out/sanitizers.txt"
  [[ -f $out/equivalence.h5 ]] && "$bin" equivalence --print "$out/equivalence.h5"
  [[ -f $out/routing_sweep.h5 ]] && "$bin" sweep routing --print "$out/routing_sweep.h5" |
    sed -n '1,/^checks/p'
} > "$out/summary.txt" 2>&1
say "finished; done: $(sed -n 's/^done: //p' "$log" | tr '\n' ' ')"
tail -c 6000 "$out/summary.txt"
