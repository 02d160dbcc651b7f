#!/usr/bin/env bash
# Nsight Compute over the decode routing and the fp4 split-K GEMM, on the GPU machine, from the
# repository root (carry: .deps; prebuilt binaries: MOEFIN_PREBUILT=1 scripts/device_prepare.sh).
# Where a kernel's time goes when events can only say how long it takes: per-kernel duration,
# issue-slot use, warp stall reasons, and per SASS instruction the stall samples.
#   1. routing at T = NCU_TOKENS (default 1) for each shape of NCU_SHAPES (default the three seed
#      shapes): moefin's `fast` and, in a build with them, the released routing block kernel
#      (sweep routing, no checks, 3 rounds); NCU_SAMPLING=0 samples warp states every 32 cycles
#   2. the split-K GEMM, fp4, top-8 GEMM1 at T = 1 and 16, isolated (sweep gemm, one variant),
#      at routing tile NCU_GEMM_TILE (default 16), with the candidates of NCU_GEMM_CANDIDATES
#      beside it (default none; e.g. tscale: the tiled-scale kernel, two launches of each)
# ncu runs with --clock-control none (the clocks as the benchmarks see them). NCU_PHASES picks
# phases (default: build routing gemm). In $OUT:
#   ncu_log.txt          everything printed
#   routing.ncu-rep, gemm.ncu-rep     the reports (open with ncu-ui)
#   routing_details.csv, gemm_details.csv   every section's metrics, one row per metric
#   routing_source.csv, gemm_source.csv     per SASS instruction: samples and stall reasons
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-out/ncu}
budget=${NCU_BUDGET_S:-300}
phases=${NCU_PHASES:-build routing gemm}
tokens=${NCU_TOKENS:-1}
shapes=${NCU_SHAPES:-top-8 top-22 top-16}
# Warp-state sampling every 2^(5 + N) cycles (0: every 32, for kernels of a few microseconds).
interval=${NCU_SAMPLING:-auto}
gemm_tile=${NCU_GEMM_TILE:-16}
gemm_candidates=${NCU_GEMM_CANDIDATES:-none}
mkdir -p "$out"
log=$out/ncu_log.txt
touch "$log"
tag=ncu
# shellcheck source=scripts/gpu/phases.sh
source scripts/gpu/phases.sh
start_log
ncu=$(command -v ncu || true)
[[ -z $ncu ]] && { say "ncu not on PATH"; exit 1; }
"$ncu" --version >> "$log" 2>&1
sections=(--section SpeedOfLight --section LaunchStats --section Occupancy
  --section SchedulerStats --section WarpStateStats --section InstructionStats
  --section SourceCounters --section MemoryWorkloadAnalysis)
profile() { # NAME KERNEL_REGEX COUNT CMD...: append to NAME.ncu-rep
  local name=$1 regex=$2 count=$3
  shift 3
  run "$name" 30 0 "$ncu" --clock-control none --graph-profiling node -k "regex:$regex" \
    --launch-count "$count" "${sections[@]}" --warp-sampling-interval "$interval" \
    --import-source no -f -o "$out/$name.tmp" "$@"
}
export_rep() { # NAME: the csv pages of every NAME.tmp*.ncu-rep
  local name=$1 f
  for f in "$out/$name".tmp*.ncu-rep; do
    [[ -f $f ]] || continue
    echo "# $f" >> "$out/${name}_details.csv"
    "$ncu" -i "$f" --page details --csv >> "$out/${name}_details.csv" 2>> "$log"
    echo "# $f" >> "$out/${name}_source.csv"
    "$ncu" -i "$f" --page source --csv --print-source sass >> "$out/${name}_source.csv" 2>> "$log"
  done
}

for phase in $phases; do
  case $phase in
  build)
    build_phase moefin
    ;;
  routing)
    for s in $shapes; do
      profile "routing_$s" 'routing_fast|routingIndices' 4 \
        "$bin" sweep routing --shapes "$s" --tokens "$tokens" --impls fast,released \
        --rounds 3 --launches 2 --checks 0 -o "$out/routing_$s.h5"
      mv -f "$out/routing_$s.tmp.ncu-rep" "$out/routing.tmp.$s.ncu-rep" 2>/dev/null
      rm -f "$out/routing_$s.h5"
    done
    export_rep routing
    mark_done routing
    ;;
  gemm)
    # Two launches of each kernel: splitk's and one per candidate.
    count=$((2 * ($(tr ',' ' ' <<< "$gemm_candidates" | wc -w) + 1)))
    [[ $gemm_candidates == none ]] && count=2
    for t in 1 16; do
      profile "gemm_t$t" 'decode_gemm' "$count" \
        "$bin" sweep gemm --shapes top-8 --tokens "$t" --gemms 1 --formats fp4 \
        --variants splitk --modes isolated --rounds 3 --check-tokens none --no-diagnose \
        --tile-m "$gemm_tile" --candidates "$gemm_candidates" --min-mb 16 -o "$out/gemm_t$t.h5"
      mv -f "$out/gemm_t$t.tmp.ncu-rep" "$out/gemm.tmp.t$t.ncu-rep" 2>/dev/null
      rm -f "$out/gemm_t$t.h5"
    done
    export_rep gemm
    mark_done gemm
    ;;
  esac
done
# At most 8 files come back: the csv pages, the log and one report per family.
for name in routing gemm; do
  shopt -s nullglob
  reps=("$out/$name".tmp*.ncu-rep)
  ((${#reps[@]})) && mv -f "${reps[0]}" "$out/$name.ncu-rep"
  rm -f "$out/$name".tmp*.ncu-rep
done
ls -la "$out" | tee -a "$log"
