#!/usr/bin/env bash
# The decode chain's race benchmark cell, the split-K GEMM's grid and the routing sweep beside
# the released routing kernel, on the GPU machine, from the repository root (carry: .deps).
# Binaries of build-device only (scripts/device_build.sh first; no ctest). Correctness first:
#   1. test_decode_gpu (the split-K GEMM against the reference, a grid smaller than the wave
#      bitwise the wave's, the multi-tile layouts with n = 96)
#   2. moefin race, all-early, metadata before the wait, 25 us in routing, for bf16 and fp4
#      (split-K GEMMs on half the SMs each: gemm::chain_grid) and bf16-tiled (the reference
#      point), with the benchmark cell's per-CTA timelines (--stamps): the benchmark cell must
#      mismatch in >= 90% of its 200 iterations, every cell the verifier orders in none
#   3. moefin equivalence, bf16 and fp4, top-8 and top-22, T = 1, 4, 16, seed-after and safe,
#      LAYERFIX_ROUTINGS (default 500) routings each: 0 mismatches with the smaller GEMM grid
#   4. moefin sweep routing, the three seed shapes, T = 1..16: block, fast and (when the build
#      has the released kernels) the released routing block kernel, ratio_vs_released
# Time: the build (seconds with prebuilt binaries, ~5 min cold) plus at most LAYERFIX_BUDGET_S
# (default 200 s: tests ~15 s, race ~15 s, equivalence ~60 s, routing ~40 s). A phase that does
# not fit is skipped with a line in the log; a run cut by the budget stops with SIGINT and keeps
# its finished rows. LAYERFIX_PHASES picks phases (default: build test race equivalence routing).
# In $OUT (8 files):
#   layerfix_log.txt     everything printed, "done: PHASE" per finished phase
#   gpu_tests.txt        scripts/gpu_tests.sh test_decode_gpu
#   race_bf16.h5, race_fp4.h5, race_bf16_tiled.h5   the race matrix per weights format, with
#                        the benchmark cell's timelines
#   equivalence.h5       moefin equivalence (decode GEMMs)
#   routing_sweep.h5     moefin sweep routing (with the released rows)
#   summary.txt          the race matrices, the benchmark cell's timeline per kernel (first and
#                        last CTA start, last end, relative to routing's first start), the
#                        equivalence table and the routing table; printed last as well
# Reading it: in summary.txt, the benchmark cell (R, all four kernels at entry) of race bf16 and
# fp4 shows N/200 with N >= 180, and its timeline has finalize's first start before routing's
# last end; the routing table's `vs released` column at T = 1 is released/impl (>= 0.83 is
# within 1.2x of the released kernel).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-out/layerfix}
budget=${LAYERFIX_BUDGET_S:-200}
phases=${LAYERFIX_PHASES:-build test race equivalence routing}
mkdir -p "$out"
log=$out/layerfix_log.txt
touch "$log"
tag=layerfix
# shellcheck source=scripts/gpu/phases.sh
source scripts/gpu/phases.sh
start_log

for phase in $phases; do
  case $phase in
  build)
    build_phase "moefin test_decode_gpu"
    ;;
  test)
    (($(left) < 40)) && { say "test: skipped (budget)"; continue; }
    say "test: scripts/gpu_tests.sh test_decode_gpu"
    scripts/gpu_tests.sh --timeout 60 'test_decode_gpu' > "$out/gpu_tests.txt" 2>&1
    rc=$?
    tail -6 "$out/gpu_tests.txt" | tee -a "$log"
    ((rc == 0)) && mark_done test
    ;;
  race)
    for f in bf16 fp4 bf16-tiled; do
      run "race-$f" 5 100 "$bin" race --presets all-early --meta before --delay-ns 25000 \
        --weights-format "$f" --stamps --out "$out/race_${f//-/_}.h5" && mark_done "race-$f"
    done
    ;;
  equivalence)
    run equivalence 20 40 "$bin" equivalence --shapes top-8,top-22 --tokens 1,4,16 \
      --presets seed-after,safe --weights-format bf16,fp4 --routings "${LAYERFIX_ROUTINGS:-500}" \
      --out "$out/equivalence.h5" && mark_done equivalence
    ;;
  routing)
    run routing 10 0 "$bin" sweep routing --out "$out/routing_sweep.h5" && mark_done routing
    ;;
  *)
    say "unknown phase '$phase'"
    ;;
  esac
done

# The benchmark cell's timeline per kernel, from a race file's timeline groups: CTAs, first and
# last start, last end (us after routing's first start), and whether finalize started before
# routing ended (the race needs it).
timelines() {
  python3 - "$1" << 'EOF'
import sys
import h5py
import numpy as np
with h5py.File(sys.argv[1], "r") as h:
    for name in sorted(k for k in h if k.startswith("timeline_race")):
        g = h[name]
        key = g.attrs.get("key", b"")
        key = key.decode() if isinstance(key, bytes) else str(key)
        if "p=en,g1=en,a=en,g2=en,meta=before" not in key:
            continue
        kernels = g.attrs["kernels"]
        kernels = (kernels.decode() if isinstance(kernels, bytes) else str(kernels)).split(",")
        k, start, end = (np.asarray(g[f]) for f in ("kernel", "start_ns", "end_ns"))
        ok = start > 0
        t0 = start[ok & (k == 0)].min() if np.any(ok & (k == 0)) else start[ok].min()
        print(f"  timeline {key}")
        last = {}
        for i, n in enumerate(kernels):
            m = ok & (k == i)
            if not np.any(m):
                print(f"    {n:9s} no stamps")
                continue
            s, e = (start[m] - t0) / 1e3, (end[m] - t0) / 1e3
            last[n] = (s.min(), e.max())
            print(f"    {n:9s} {int(m.sum()):5d} CTAs  start {s.min():8.2f} .. {s.max():8.2f} us"
                  f"  last end {e.max():8.2f} us")
        if "finalize" in last and "routing" in last:
            early = last["finalize"][0] < last["routing"][1]
            print(f"    finalize's first CTA starts {'before' if early else 'after'} routing "
                  f"ends")
EOF
}

{
  for f in bf16 fp4 bf16-tiled; do
    file=$out/race_${f//-/_}.h5
    [[ -f $file ]] || continue
    echo "race, $f weights:"
    "$bin" race --print "$file" | tail -16
    timelines "$file"
  done
  [[ -f $out/equivalence.h5 ]] && "$bin" equivalence --print "$out/equivalence.h5"
  [[ -f $out/routing_sweep.h5 ]] && "$bin" sweep routing --print "$out/routing_sweep.h5" |
    sed -n '1,/^checks/p'
  tail -4 "$out/gpu_tests.txt" 2>/dev/null
} > "$out/summary.txt" 2>&1
say "finished; done: $(sed -n 's/^done: //p' "$log" | tr '\n' ' ')"
tail -c 9000 "$out/summary.txt"
