#!/usr/bin/env bash
# The fast finalize paths on the GPU machine (issue 15), from the repository root with .deps
# carried: builds, checks every new variant against the Kokkos reference, then measures, and
# fills small_batch_v2's policy table from its own measurement before timing it. In $OUT:
#   finalize_fast_log.txt          everything printed: build facts (ptxas -v), the gpu tests of
#                                  the new paths, the check summary, the sanitizers, the tables
#   finalize_fast_check.h5         moefin check finalize: small_batch_v2, its ablations and every
#                                  geometry candidate against the reference (poisoned outputs)
#   finalize_fast_candidates.h5    the policy measurement: every small_batch_v2 geometry at
#                                  T = 1..8, H = 1024..7168, K = 6..32 (bf16), modes a and b
#                                  with the entry trigger, mode b with the exit trigger
#   small_batch_v2_table.hpp       the table scripts/v2_policy.py made from it (commit it as
#                                  kernels/finalize/small_batch_v2_table.hpp); moefin is rebuilt
#                                  with it before the comparison
#   finalize_fast_sweep.h5         the comparison in the same interleaved rounds, modes a, b, c,
#                                  hot L2, the small-batch regime, K = 6..32, bf16: scalar,
#                                  small_batch, small_batch_v2 and its ablations (late trigger,
#                                  no shuffle, no broadcast, late address, released geometry),
#                                  fi_small_batch when the released kernels are built (else a
#                                  note), with the launch floor and copy bandwidth of the run
#   finalize_fast_layer.h5         moefin sweep layer, the three seed shapes, T = 1, 2, 4, 8, 16,
#                                  finalize new / previous / small_batch_v2 / fused at
#                                  seed-after and seed-before, with per-CTA timelines at T = 1
#                                  and 16
#   finalize_fast_equivalence.h5   moefin equivalence of the fused layer, seed-after: 10,000
#                                  routings per shape (2,000 per T), PDL on vs off bitwise
#   finalize_fast_chain.tar.gz     race_small_batch_v2.h5 and race_fused.h5 (race matrix cells,
#                                  all-early and seed-after, metadata before the wait, delays 0
#                                  and 25 us, 100 routings each) and the sanitizer logs
# Time: the build (scripts/device_build.sh, about 2-3 minutes on 16 cores) and then about 6
# minutes of runs; FINALIZE_FAST_BUDGET_S (default 480) bounds the runs after the build: each
# phase is skipped with a line in the log when it does not fit, and the sweeps stop cleanly at
# --max-minutes (a second call continues them: FINALIZE_FAST_RESUME_DIR=a copy of $OUT).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
: "${OUT:?set OUT to the folder whose files come back}"
budget=${FINALIZE_FAST_BUDGET_S:-480}
prev=${FINALIZE_FAST_RESUME_DIR:-}
mkdir -p "$OUT"
if [[ -n $prev && -d $prev ]]; then
  for f in "$prev"/finalize_fast_*.h5; do [[ -f $f ]] && cp "$f" "$OUT/"; done
fi
log=$OUT/finalize_fast_log.txt
work=$(mktemp -d)
SECONDS=0
say() { echo "[finalize_fast ${SECONDS}s] $*" | tee -a "$log"; }
run_start=0
left() { echo $((budget - (SECONDS - run_start))); }
# Minutes for a sweep's --max-minutes: what is left after RESERVE seconds for later phases, at
# most CAP minutes and never under 0.3 (0 would mean no limit).
minutes() { # reserve_s cap_min
  awk -v s="$(($(left) - $1))" -v cap="$2" \
    'BEGIN { m = s / 60; if (m > cap) m = cap; if (m < 0.3) m = 0.3; printf "%.2f", m }'
}
fits() { # seconds: true when that much is left of the budget
  if (($(left) < $1)); then
    say "skipped: $2 needs ~$1 s, $(left) s left (run again with FINALIZE_FAST_RESUME_DIR)"
    return 1
  fi
}
logged() { # limit_s command...: the command's output into the log, its status returned
  local limit=$1
  shift
  say "\$ $*"
  timeout --signal=INT "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  say "exit $rc"
  return $rc
}
io() { [[ -f $1 ]] && echo "--resume $1" || echo "--out $1"; }

say "start: budget ${budget}s after the build"
if ! scripts/device_build.sh >>"$log" 2>&1; then
  tail -60 "$log"
  exit 1
fi
prefix=$PWD/.deps/prefix
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=$PWD/build-device/moefin
run_start=$SECONDS
say "built in ${SECONDS}s"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >>"$log" 2>&1

# 1. Build facts and correctness: registers/spills, the gpu tests of the new paths.
{
  echo "== ptxas -v, finalize units (sm_90)"
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  for src in kernels/finalize/finalize_dispatch.cu kernels/finalize/small_batch_v2_dispatch.cu; do
    "$nvcc" -std=c++17 -arch=sm_90 -O3 --expt-relaxed-constexpr -DMOEFIN_HAVE_CUDA=1 -I. \
      -Xptxas -v -c "$src" -o "$work/x.o" 2>&1 | grep -E "Compiling entry|registers|spill" |
      sed -E 's/_ZN6moefin8finalize7kernels[0-9]+//'
  done
} >>"$log" 2>&1
logged 240 build-device/tests/test_finalize_fast_gpu --log_level=test_suite
logged 120 build-device/tests/test_finalize_gpu
logged 120 build-device/tests/test_chain_kernels \
  --run_test=fused_finalize_gemm2_is_bitwise_the_reference_finalize_of_its_output

# 2. The check: the named variants on a grid of edges, the candidates where the table is filled.
check=$OUT/finalize_fast_check.h5
v2_names=small_batch_v2,small_batch_v2_late_trigger,small_batch_v2_no_shuffle
v2_names+=,small_batch_v2_no_broadcast,small_batch_v2_late_address
v2_names+=,small_batch_v2_fi_geometry
if fits 60 check; then
  # shellcheck disable=SC2046
  logged $(($(left) - 30)) "$bin" check finalize --variants "$v2_names" --hidden 1024,2880,7168 \
    --tokens 1,3,8,64 --top-k 1,5,6,8,10,16,22,32,33,64 --weights bf16,fp32,none \
    --routings uniform,uniform/ep2,hot --max-minutes "$(minutes 380 1.0)" $(io "$check")
fi
if fits 40 "check of the candidates"; then
  # shellcheck disable=SC2046
  logged $(($(left) - 30)) "$bin" check finalize --variants small_batch_v2/candidates \
    --hidden 2048,7168 --tokens 1,4,8 --top-k 6,8,10,16,22,32 --weights bf16 \
    --routings uniform/ep2 --max-minutes "$(minutes 360 0.5)" $(io "$check")
fi

# 3. Sanitizers on a small check of small_batch_v2 (shuffles, the anchor store, shared memory
# of the ablation) and on the fused GEMM2 test.
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
{
  echo "== compute-sanitizer ($(date -u +%FT%TZ))"
} >>"$log"
for tool in memcheck racecheck synccheck initcheck; do
  fits 35 "compute-sanitizer $tool" || break
  f=$work/sanitizer_$tool.h5
  timeout 30 "$cs" --tool "$tool" --error-exitcode 9 "$bin" check finalize --variants \
    small_batch_v2,small_batch_v2_no_shuffle,small_batch_v2_no_broadcast --hidden 2880 \
    --tokens 1,5 --top-k 6,33 --weights fp32 --routings uniform/ep2 --out "$f" \
    >"$work/san_$tool.log" 2>&1
  rc=$?
  say "compute-sanitizer $tool (small_batch_v2): exit $rc $( ((rc == 124)) && echo '(timed out)')"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|check finalize:" "$work/san_$tool.log" | tee -a "$log"
done
if fits 40 "compute-sanitizer memcheck of the fused GEMM2"; then
  timeout 30 "$cs" --tool memcheck --error-exitcode 9 build-device/tests/test_chain_kernels \
    --run_test=fused_finalize_gemm2_is_bitwise_the_reference_finalize_of_its_output \
    >"$work/san_fused.log" 2>&1
  say "compute-sanitizer memcheck (fused GEMM2): exit $?"
  grep -E "ERROR SUMMARY|No errors|failure" "$work/san_fused.log" | tee -a "$log"
fi

# 4. The policy measurement, then the table and a rebuild with it.
cand=$OUT/finalize_fast_candidates.h5
# shellcheck disable=SC2054
grid=(--hidden 1024,2048,2880,3584,4096,5120,6144,7168 --tokens 1,2,3,4,5,6,7,8
      --top-k 6,8,10,16,22,32 --weights bf16 --l2 hot --rounds 3 --launches 40 --repeat-shapes 0)
if fits 90 "candidate sweep (entry)"; then
  # shellcheck disable=SC2046
  logged $(($(left) - 20)) "$bin" sweep finalize --variants small_batch_v2/candidates \
    --modes a,b "${grid[@]}" --max-minutes "$(minutes 300 2.0)" $(io "$cand")
fi
if fits 60 "candidate sweep (exit)" && [[ -f $cand ]]; then
  logged $(($(left) - 20)) "$bin" sweep finalize --variants small_batch_v2/candidates/exit \
    --modes b "${grid[@]}" --max-minutes "$(minutes 250 1.0)" --resume "$cand"
fi
table=$OUT/small_batch_v2_table.hpp
if [[ -f $cand ]] && python3 scripts/v2_policy.py "$cand" --out "$table" >>"$log" 2>&1; then
  cp "$table" kernels/finalize/small_batch_v2_table.hpp
  logged 240 cmake --build build-device --target moefin -j"$(nproc)" &&
    say "moefin rebuilt with the measured table ($(grep -c 'Trigger::' "$table") entries)"
else
  say "policy table not filled (no candidate file or no usable rows): the comparison uses the rule"
fi

# 5. The comparison, same rounds, modes a, b, c, with the launch floor of the run.
sweep=$OUT/finalize_fast_sweep.h5
variants=small_batch,$v2_names
if "$bin" sweep finalize --variants fi_small_batch --hidden 1024 --tokens 1 --top-k 8 \
  --estimate >/dev/null 2>&1; then
  variants+=,fi_small_batch
  say "fi_small_batch (the released kernel) is built: timed in the same rounds"
else
  say "note: fi_small_batch is not built here (no released-kernel adapter): the comparison has" \
    "moefin's kernels only; the released kernel's rows need the adapter's build"
fi
if fits 90 "comparison sweep"; then
  # shellcheck disable=SC2046
  logged $(($(left) - 20)) "$bin" sweep finalize --variants "$variants" --modes a,b,c --l2 hot \
    --top-k 6,8,10,16,22,32 --weights bf16 --rounds 5 --launches 50 --repeat-shapes 8 \
    --max-minutes "$(minutes 130 2.5)" $(io "$sweep")
fi

# 6. The layer: fused against GEMM2 + the best separate finalize.
layer=$OUT/finalize_fast_layer.h5
if fits 60 "layer sweep"; then
  # shellcheck disable=SC2046
  logged $(($(left) - 20)) "$bin" sweep layer --shapes top-8,top-22,top-16 --tokens 1,2,4,8,16 \
    --finalize new,previous,small_batch_v2,fused --rounds 7 --stamps=1,16 $(io "$layer")
fi

# 7. Equivalence of the fused layer, then the race matrix cells of v2 and fused.
equiv=$OUT/finalize_fast_equivalence.h5
if fits 60 "fused equivalence"; then
  # shellcheck disable=SC2046
  logged $(($(left) - 20)) "$bin" equivalence --shapes top-8,top-22,top-16 --tokens 1,2,4,8,16 \
    --presets seed-after --set finalize.variant=fused --routings 2000 $(io "$equiv")
fi
for fin in small_batch_v2 fused; do
  if fits 40 "race matrix ($fin)"; then
    logged $(($(left) - 15)) "$bin" race --finalize "$fin" --presets all-early,seed-after \
      --meta before --delays 0,25000 --iterations 100 --out "$work/race_$fin.h5"
  fi
done
(cd "$work" && tar -czf "$OUT/finalize_fast_chain.tar.gz" --ignore-failed-read \
  race_small_batch_v2.h5 race_fused.h5 san_*.log 2>/dev/null)

# Summary (last): what came back and the tables.
{
  [[ -f $sweep ]] && "$bin" sweep finalize --table "$sweep"
  [[ -f $layer ]] && "$bin" sweep layer --print "$layer"
  [[ -f $equiv ]] && "$bin" equivalence --print "$equiv"
} >>"$log" 2>&1
say "files:"
ls -la "$OUT" | tee -a "$log"
say "summary: $(grep -hE '^check finalize:' "$log" | tail -2 | tr '\n' ' ')"
grep -hE '^(wrote|incomplete)' "$log" | tail -6
grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | sort | uniq -c
say "done"
